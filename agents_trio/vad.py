"""``agents_trio.vad``: LiveKit's ``livekit.agents.vad`` names. ``VAD`` is the Trio-native
protocol a model author implements (LiveKit's plugins: ``agents_trio.plugins.adapt()``)."""

from __future__ import annotations

from .events import VADMetrics
from .models import VAD, VADEvent, VADEventType, VADStream

__all__ = ["VAD", "VADEvent", "VADEventType", "VADMetrics", "VADStream"]
