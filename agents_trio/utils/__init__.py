"""``agents_trio.utils``: LiveKit's ``livekit.agents.utils`` helpers, Trio-native
(``utils.audio.audio_frames_from_file``)."""

from __future__ import annotations

from . import audio

__all__ = ["audio"]
