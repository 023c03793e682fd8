"""``agents_trio.tts``: LiveKit's ``livekit.agents.tts`` names. ``TTS`` is the Trio-native
protocol a model author implements (LiveKit's plugins: ``agents_trio.plugins.adapt()``)."""

from __future__ import annotations

from .fallback.tts import AvailabilityChangedEvent, FallbackAdapter
from .model_capabilities import SynthesizedAudio, TTSCapabilities
from .models import TTS
from .tts_stream_adapter import StreamAdapter

__all__ = ["AvailabilityChangedEvent", "FallbackAdapter", "StreamAdapter", "SynthesizedAudio",
           "TTS", "TTSCapabilities"]
