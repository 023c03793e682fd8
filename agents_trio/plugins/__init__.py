"""LiveKit Agents plugins as Trio models: every provider with a LiveKit plugin works here.

    from livekit.plugins import deepgram, openai, cartesia, silero

    session = AgentSession(stt=deepgram.STT(), llm=openai.LLM(), tts=cartesia.TTS(),
                           vad=silero.VAD.load())   # adapted here, by adapt()

``AgentSession``, ``Agent`` and ``AgentTask`` call :func:`adapt` on the LiveKit models they are
given (``agents_trio.model_resolution``); call it yourself to use a plugin outside a session.
Each adapter satisfies the protocol of ``agents_trio.models`` (or ``agents_trio.realtime``)
and runs the plugin on an asyncio bridge: the one given to it, else the current one when a
stream opens (a job's, an ``agents_trio.open_bridge()`` block's), else the one its session
opens on demand (``agents_trio.io.bridge_on_demand``). Streams are Trio async iterators; cancelling the Trio
side closes the plugin's stream; provider failures are raised as ``agents_trio.APIError``.

Plugins that hand work to their own ``concurrent.futures`` executor (LiveKit's decoder of the
mp3/ogg audio most hosted TTS send, ``livekit.agents.inference.VAD``) work unchanged: the
bridge's loop accepts any executor. A VAD's per-window inference handed to the loop's default
executor (Silero's) runs on the loop by default: a thread round trip per 32 ms window costs
more than the inference (``VADAdapter(vad, inference_on_loop=False)`` keeps the executor).
End-of-turn models: :class:`TurnDetectorAdapter` (see
``agents_trio.plugins.turn_detector``). A plugin's CPU-heavy work that runs on the loop itself
stalls every session: see ``agents_trio.blocking``.

Needs ``livekit-agents`` (``pip install 'agents-trio[livekit-plugins]'``).
"""

from __future__ import annotations

try:
    from livekit.agents import llm as _lk_llm
    from livekit.agents import stt as _lk_stt
    from livekit.agents import tts as _lk_tts
    from livekit.agents import vad as _lk_vad
except ImportError as _e:  # pragma: no cover - depends on the install
    raise ImportError("agents_trio.plugins needs livekit-agents: "
                      "pip install 'agents-trio[livekit-plugins]'") from _e

import typing

from ._common import to_api_error
from .llm import LLMAdapter
from .realtime import RealtimeModelAdapter, RealtimeSessionAdapter
from ..models import VAD as _TrioVAD
from ..stt_stream_adapter import StreamAdapter as _StreamAdapter
from .stt import RecognitionStream, RecognizingSTTAdapter, STTAdapter
from .tts import TTSAdapter
from .audio_turn_detector import AudioTurnDetectorAdapter, is_lk_audio_turn_detector
from .turn_detector import TurnDetectorAdapter, is_lk_turn_detector
from .vad import VADAdapter
from .resolve import adapt_livekit_stt as _adapt_livekit_stt

if typing.TYPE_CHECKING:
    from ..io.bridge import AsyncioBridge

__all__ = ["AudioTurnDetectorAdapter", "LLMAdapter", "RealtimeModelAdapter", "RealtimeSessionAdapter", "RecognitionStream",
           "RecognizingSTTAdapter", "STTAdapter", "TTSAdapter", "TurnDetectorAdapter", "VADAdapter", "adapt",
           "is_lk_audio_turn_detector", "is_lk_turn_detector", "to_api_error"]


_M = typing.TypeVar("_M")


@typing.overload
def adapt(model: _lk_llm.RealtimeModel, *, bridge: AsyncioBridge | None = None,
          vad: object = None) -> RealtimeModelAdapter: ...
@typing.overload
def adapt(model: _lk_llm.LLM[typing.Any], *, bridge: AsyncioBridge | None = None,
          vad: object = None) -> LLMAdapter: ...
@typing.overload
def adapt(model: _lk_stt.STT[typing.Any], *, bridge: AsyncioBridge | None = None,
          vad: _lk_vad.VAD | VADAdapter | None = None) -> STTAdapter: ...
@typing.overload
def adapt(model: _lk_stt.STT[typing.Any], *, bridge: AsyncioBridge | None = None,
          vad: object = None) -> STTAdapter | _StreamAdapter: ...
@typing.overload
def adapt(model: _lk_tts.TTS[typing.Any], *, bridge: AsyncioBridge | None = None,
          vad: object = None) -> TTSAdapter: ...
@typing.overload
def adapt(model: _lk_vad.VAD, *, bridge: AsyncioBridge | None = None,
          vad: object = None) -> VADAdapter: ...
@typing.overload
def adapt(model: _M, *, bridge: AsyncioBridge | None = None, vad: object = None) -> _M: ...
def adapt(model: object, *, bridge: AsyncioBridge | None = None, vad: object = None
          ) -> object:
    """The adapter matching a LiveKit Agents model; anything else is returned unchanged.

    Args:
        model: A LiveKit ``llm.LLM``, ``llm.RealtimeModel``, ``stt.STT``, ``tts.TTS``,
            ``vad.VAD`` or a ``livekit-plugins-turn-detector`` model (``MultilingualModel``,
            ``EnglishModel``) (or a Trio model, or None). A LiveKit-protocol turn detector of
            your own (asyncio methods) looks like a Trio one: wrap it with
            :class:`TurnDetectorAdapter`.
        bridge: The bridge to run it on (default: the current bridge at each call).
        vad: The VAD that segments a non-streaming STT: a LiveKit VAD (LiveKit's
            ``stt.StreamAdapter`` then wraps the STT, in asyncio), or a Trio one such as
            ``agents_trio.offline.SileroVAD`` (``agents_trio.stt.StreamAdapter`` then wraps a
            :class:`RecognizingSTTAdapter`).
    """
    if isinstance(model, _lk_llm.RealtimeModel):
        return RealtimeModelAdapter(model, bridge=bridge)
    if isinstance(model, _lk_llm.LLM):
        return LLMAdapter(model, bridge=bridge)
    if isinstance(model, _lk_stt.STT):
        if vad is not None and not isinstance(vad, (_lk_vad.VAD, VADAdapter, _TrioVAD)):
            raise TypeError(f"adapt(stt, vad=...) takes a VAD, got {vad!r}")
        return _adapt_livekit_stt(model, vad=vad, bridge=bridge)
    if isinstance(model, _lk_tts.TTS):
        return TTSAdapter(model, bridge=bridge)
    if isinstance(model, _lk_vad.VAD):
        return VADAdapter(model, bridge=bridge)
    if is_lk_audio_turn_detector(model):
        return AudioTurnDetectorAdapter(model, bridge=bridge)  # type: ignore[arg-type]
    if is_lk_turn_detector(model):
        return TurnDetectorAdapter(model, bridge=bridge)  # type: ignore[arg-type]
    return model
