"""``from agents_trio.plugins import silero``: the names of LiveKit's ``livekit.plugins.silero``
that an agent uses, run natively.

    from agents_trio.plugins import silero   # instead of: from livekit.plugins import silero

    session = AgentSession(vad=silero.VAD.load(min_silence_duration=0.4), ...)

``silero.VAD`` is :class:`agents_trio.offline.SileroVAD`: ``load()`` takes the plugin's
arguments and defaults and loads the plugin's ONNX model, and agents_trio does the plugin's
per-window work itself (the same events), with no asyncio and no bridge. LiveKit's own
``silero.VAD.load()`` keeps working too (the session adapts it, at several times the cost per
window beyond the model). Needs ``livekit-plugins-silero`` (``pip install -e '.[voice]'``).
"""

from __future__ import annotations

from ..offline.silero import SileroVAD as VAD
from ..offline.silero import SileroVADStream as VADStream

__all__ = ["VAD", "VADStream"]
