"""The plugin tests' fakes: ``agents_trio.testing.livekit_fakes`` with the defaults these
tests were written for (a 0.5 s first token, 10 ms of a constant tone per character)."""

from __future__ import annotations

from typing import Any

from agents_trio.testing.livekit_fakes import (
    NO_RETRY,
    FakePluginRealtimeModel,
    FakePluginRealtimeSession,
    FakePluginSTT as _FakePluginSTT,
    FakePluginVAD,
    is_loud,
)
from agents_trio.testing.livekit_fakes import FakePluginLLM as _FakePluginLLM
from agents_trio.testing.livekit_fakes import FakePluginTTS as _FakePluginTTS

__all__ = ["NO_RETRY", "RATE", "FakePluginLLM", "FakePluginRealtimeModel",
           "FakePluginRealtimeSession", "FakePluginSTT", "FakePluginTTS", "FakePluginVAD",
           "is_loud"]

RATE = 24000


class FakePluginLLM(_FakePluginLLM):
    def __init__(self, replies: Any, *, ttft: float = 0.5, **kwargs: Any) -> None:
        super().__init__(replies, ttft=ttft, **kwargs)


class FakePluginSTT(_FakePluginSTT):
    def __init__(self, transcript: str = "what's the weather", **kwargs: Any) -> None:
        super().__init__(transcript, **kwargs)

    @property
    def transcript(self) -> str:
        return self.transcripts[0]


class FakePluginTTS(_FakePluginTTS):
    def __init__(self, *, seconds_per_char: float = 0.01, **kwargs: Any) -> None:
        super().__init__(seconds_per_char=seconds_per_char, **kwargs)

    def pcm(self, text: str) -> bytes:  # a constant level, as the tests' audio checks expect
        import numpy as np
        samples = int(round(self.duration_of(text) * self.sample_rate))
        return np.full(samples, 1000, dtype=np.int16).tobytes()
