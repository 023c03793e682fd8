"""``agents_trio.tts``: LiveKit's ``livekit.agents.tts`` names. ``TTS`` is the Trio-native
protocol a model author implements (LiveKit's plugins: ``agents_trio.plugins.adapt()``)."""

from __future__ import annotations

from .fallback.tts import AvailabilityChangedEvent, FallbackAdapter
from .models import TTS

__all__ = ["TTS", "AvailabilityChangedEvent", "FallbackAdapter"]
