"""``agents_trio.stt``: LiveKit's ``livekit.agents.stt`` names. ``STT`` is the Trio-native
protocol a model author implements (LiveKit's plugins: ``agents_trio.plugins.adapt()``);
``RecognizeStream`` (also ``SpeechStream``) is the protocol of what its ``stream()`` returns,
``STTStream`` in the rest of this package. ``StreamAdapter(stt=, vad=)`` makes an STT that
only recognizes whole recordings (``recognize(buffer)``, :class:`RecognizingSTT`) stream."""

from __future__ import annotations

from .fallback.stt import AvailabilityChangedEvent, FallbackAdapter
from .model_capabilities import STTCapabilities
from .models import (STT, RecognitionUsage, SpeechData, SpeechEvent, SpeechEventType, STTStream,
                     TimedString)
from .stt_stream_adapter import RecognizingSTT, StreamAdapter

RecognizeStream = STTStream
SpeechStream = STTStream

__all__ = ["STT", "STTCapabilities", "AvailabilityChangedEvent", "FallbackAdapter",
           "RecognitionUsage", "RecognizeStream", "STTStream", "TimedString", "SpeechData",
           "SpeechEvent", "SpeechEventType", "SpeechStream", "RecognizingSTT", "StreamAdapter"]
