"""FakeActions: the script of a fake conversation (user speech, LLM and TTS responses)."""

from __future__ import annotations

from typing import Any

import msgspec

from ..models import FunctionToolCall

_UNSET: Any = object()


class FakeUserSpeech(msgspec.Struct, kw_only=True):
    start: float
    end: float
    transcript: str
    stt_delay: float = 0.2
    final: bool = True


class FakeLLMResponse(msgspec.Struct, kw_only=True):
    content: str
    input: str
    ttft: float = 0.1
    duration: float = 0.3
    tool_calls: list[FunctionToolCall] = msgspec.field(default_factory=list)
    error: Any = None


class FakeTTSResponse(msgspec.Struct, kw_only=True):
    audio_duration: float
    input: str
    ttfb: float = 0.2
    duration: float = 0.3
    error: Any = None


class FakeActions:
    """A script: user speeches (seconds from the first pushed audio), and the LLM and TTS
    responses keyed by their input text."""

    def __init__(self) -> None:
        self.user_speeches: list[FakeUserSpeech] = []
        self.llm_responses: list[FakeLLMResponse] = []
        self.tts_responses: list[FakeTTSResponse] = []
        self._last_transcript = ""
        self._last_llm_content = ""

    def add_user_speech(self, start: float, end: float, transcript: str, *,
                        stt_delay: float = 0.2, final: bool = True) -> FakeActions:
        """The user speaks from ``start`` to ``end``; an empty transcript is noise only the VAD
        hears."""
        if end <= start:
            raise ValueError("a user speech must end after it starts")
        self.user_speeches.append(FakeUserSpeech(start=start, end=end, transcript=transcript,
                                                 stt_delay=stt_delay, final=final))
        if transcript:
            self._last_transcript = transcript
        return self

    def add_llm(self, content: str, tool_calls: list[FunctionToolCall] | None = None, *,
                input: str = _UNSET, ttft: float = 0.1, duration: float = 0.3) -> FakeActions:
        """The LLM answers ``content`` (then ``tool_calls``) when the last chat item's text is
        ``input`` (default: the last user transcript)."""
        key = self._last_transcript if input is _UNSET else input
        self.llm_responses.append(FakeLLMResponse(content=content, input=key, ttft=ttft,
                                                  duration=duration,
                                                  tool_calls=list(tool_calls or [])))
        self._last_llm_content = content
        return self

    def add_llm_error(self, error: BaseException, *, input: str = _UNSET,
                      ttft: float = 0.1) -> FakeActions:
        """The LLM fails with ``error`` after ``ttft`` for ``input``."""
        key = self._last_transcript if input is _UNSET else input
        self.llm_responses.append(FakeLLMResponse(content="", input=key, ttft=ttft,
                                                  duration=ttft, error=error))
        return self

    def add_tts(self, audio_duration: float, *, input: str = _UNSET, ttfb: float = 0.2,
                duration: float = 0.3) -> FakeActions:
        """The TTS returns ``audio_duration`` seconds of audio for ``input`` (default: the last
        LLM content)."""
        key = self._last_llm_content if input is _UNSET else input
        self.tts_responses.append(FakeTTSResponse(audio_duration=audio_duration, input=key,
                                                  ttfb=ttfb, duration=duration))
        return self

    def add_tts_error(self, error: BaseException, *, input: str = _UNSET,
                      ttfb: float = 0.2) -> FakeActions:
        key = self._last_llm_content if input is _UNSET else input
        self.tts_responses.append(FakeTTSResponse(audio_duration=0.0, input=key, ttfb=ttfb,
                                                  duration=ttfb, error=error))
        return self

    def scaled(self, speed_factor: float) -> FakeActions:
        """A copy with every time divided by ``speed_factor``."""
        if speed_factor == 1.0:
            return self
        f = 1.0 / speed_factor
        out = FakeActions()
        out.user_speeches = [msgspec.structs.replace(s, start=s.start * f, end=s.end * f,
                                                     stt_delay=s.stt_delay * f)
                             for s in self.user_speeches]
        out.llm_responses = [msgspec.structs.replace(r, ttft=r.ttft * f, duration=r.duration * f)
                             for r in self.llm_responses]
        out.tts_responses = [msgspec.structs.replace(r, audio_duration=r.audio_duration * f,
                                                     ttfb=r.ttfb * f, duration=r.duration * f)
                             for r in self.tts_responses]
        return out
