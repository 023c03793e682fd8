"""``stt.StreamAdapter``: a whole-recording STT made streaming by a VAD, as LiveKit's: start
and end of speech from the VAD, each utterance (with the padding before the VAD's start)
recognized after its end, a final transcript when there is text, in spoken order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest
import trio

from agents_trio import Agent, AgentSession
from agents_trio.io.audio import AudioInput
from agents_trio.model_capabilities import STTCapabilities
from agents_trio.models import (ChatChunk, SpeechData, SpeechEvent, SpeechEventType, VADEvent,
                                VADEventType)
from agents_trio.stt import FallbackAdapter, StreamAdapter
from livekit import rtc

RATE = 16000
FRAME = 160   # 10 ms
WORDS = {1: "hello", 2: "world", 3: "again"}


def frame(word: int) -> rtc.AudioFrame:
    """10 ms whose every sample is ``word`` (0: silence)."""
    return rtc.AudioFrame(np.full(FRAME, word, np.int16).tobytes(), RATE, 1, FRAME)


class EnergyVAD:
    """Speech starts after 3 loud frames and ends after 5 quiet ones. ``inline`` returns
    the events from ``push_frame`` (the fast path); otherwise they come by iteration."""

    def __init__(self, *, inline: bool) -> None:
        self.inline = inline

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[_EnergyStream]:
        yield _EnergyStream(self.inline)


class _EnergyStream:
    def __init__(self, inline: bool) -> None:
        self.inline = inline
        self.loud = self.quiet = 0
        self.speaking = False
        self.send, self.receive = trio.open_memory_channel[VADEvent](100)

    def push_frame(self, f: rtc.AudioFrame) -> Sequence[VADEvent] | None:
        is_loud = bool(np.frombuffer(f.data, np.int16).any())
        self.loud, self.quiet = (self.loud + 1, 0) if is_loud else (0, self.quiet + 1)
        out: list[VADEvent] = []
        if not self.speaking and self.loud == 3:
            self.speaking = True
            out.append(VADEvent(type=VADEventType.START_OF_SPEECH, speech_duration=0.03))
        elif self.speaking and self.quiet == 5:
            self.speaking = False
            out.append(VADEvent(type=VADEventType.END_OF_SPEECH, silence_duration=0.05))
        if self.inline:
            return out
        for ev in out:
            self.send.send_nowait(ev)
        return None

    def end_input(self) -> None:
        self.send.close()

    def __aiter__(self) -> AsyncIterator[VADEvent]:
        return self.receive.__aiter__()


class WordSTT:
    """Recognizes the words coded in the samples; takes ``delay`` seconds per recording."""

    def __init__(self, delay: float = 0.0) -> None:
        self.capabilities = STTCapabilities(streaming=False, interim_results=False,
                                            keyterms=True)
        self.delay = delay
        self.buffers: list[list[int]] = []
        self.keyterms: list[list[str]] = []

    async def recognize(self, buffer: rtc.AudioFrame | list[rtc.AudioFrame], *,
                        language: str | None = None) -> SpeechEvent:
        merged = buffer if isinstance(buffer, rtc.AudioFrame) else rtc.combine_audio_frames(
            buffer)
        samples = np.frombuffer(merged.data, np.int16)
        codes = [int(s) for i, s in enumerate(samples) if i % FRAME == 0]
        self.buffers.append(codes)
        await trio.sleep(self.delay)
        words: list[str] = []
        for code in codes:
            if code and (not words or words[-1] != WORDS[code]):
                words.append(WORDS[code])
        return SpeechEvent(type=SpeechEventType.FINAL_TRANSCRIPT,
                           alternatives=[SpeechData(text=" ".join(words))])

    def update_session_keyterms(self, keyterms: list[str]) -> None:
        self.keyterms.append(keyterms)


async def _run(adapter: StreamAdapter, audio: list[int]) -> list[tuple[str, str]]:
    events: list[tuple[str, str]] = []
    async with adapter.stream() as stream:
        for code in audio:
            stream.push_frame(frame(code))
            await trio.sleep(0.01)
        stream.end_input()
        async for ev in stream:
            events.append((ev.type.value, ev.alternatives[0].text if ev.alternatives else ""))
    return events


@pytest.mark.parametrize("inline", [False, True])
async def test_utterances_are_recognized_in_order_after_their_end(autojump_clock,
                                                                  inline: bool) -> None:
    stt = WordSTT(delay=0.5)   # slower than the gap between the utterances
    adapter = StreamAdapter(stt=stt, vad=EnergyVAD(inline=inline), prefix_padding=0.02)
    audio = [0] * 10 + [1] * 4 + [2] * 4 + [0] * 6 + [0] * 3 + [3] * 5 + [0] * 8
    events = await _run(adapter, audio)
    assert events == [
        ("start_of_speech", ""), ("end_of_speech", ""), ("final_transcript", "hello world"),
        ("start_of_speech", ""), ("end_of_speech", ""), ("final_transcript", "again")]
    # the first utterance: 2 frames of padding before the 3 frames the VAD measured
    first = stt.buffers[0]
    assert first[:2] == [0, 0] and first[2:10] == [1] * 4 + [2] * 4
    assert all(code == 0 for code in first[10:])


async def test_silence_alone_reports_no_transcript(autojump_clock) -> None:
    stt = WordSTT()
    adapter = StreamAdapter(stt=stt, vad=EnergyVAD(inline=True))
    assert await _run(adapter, [0] * 30) == []
    assert stt.buffers == []


async def test_capabilities_and_keyterms_pass_through() -> None:
    stt = WordSTT()
    adapter = StreamAdapter(stt=stt, vad=EnergyVAD(inline=True))
    assert adapter.capabilities.streaming and not adapter.capabilities.interim_results
    assert adapter.capabilities.keyterms
    adapter.update_session_keyterms(["Acme"])
    assert stt.keyterms == [["Acme"]]


def test_bad_arguments_fail_at_construction() -> None:
    with pytest.raises(TypeError, match="recognize"):
        StreamAdapter(stt=object(), vad=EnergyVAD(inline=True))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="VAD"):
        StreamAdapter(stt=WordSTT(), vad=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix_padding"):
        StreamAdapter(stt=WordSTT(), vad=EnergyVAD(inline=True), prefix_padding=-1)


async def test_fallback_adapter_wraps_a_batch_stt_and_passes_keyterms_on(autojump_clock
                                                                         ) -> None:
    batch = WordSTT()
    with pytest.raises(ValueError, match="does not stream"):
        FallbackAdapter([batch])
    fallback = FallbackAdapter([batch], vad=EnergyVAD(inline=True))
    [wrapped] = fallback.models
    assert isinstance(wrapped, StreamAdapter) and wrapped.stt is batch
    assert fallback.capabilities.keyterms and fallback.capabilities.streaming
    fallback.update_session_keyterms(["Acme"])
    assert batch.keyterms == [["Acme"]]
    events: list[tuple[str, str]] = []
    async with fallback, fallback.stream() as stream:
        for code in [0] * 5 + [1] * 5 + [0] * 8:
            stream.push_frame(frame(code))
            await trio.sleep(0.01)
        stream.end_input()
        async for ev in stream:
            events.append((ev.type.value, ev.alternatives[0].text if ev.alternatives else ""))
    assert ("final_transcript", "hello") in events


class CodedAudio(AudioInput):
    """The user's audio: the coded frames, one every 10 ms, then silence until closed."""

    def __init__(self, codes: list[int]) -> None:
        self.codes = list(codes)

    async def __anext__(self) -> rtc.AudioFrame:
        await trio.sleep(0.01)
        return frame(self.codes.pop(0) if self.codes else 0)


class EchoLLM:
    """Answers "heard: <last user text>"."""

    @asynccontextmanager
    async def chat(self, *, chat_ctx: Any, tools: Any = None,  # noqa: ANN401
                   tool_choice: Any = None) -> AsyncIterator[Any]:  # noqa: ANN401
        text = [i.text_content for i in chat_ctx.items
                if getattr(i, "role", None) == "user"][-1]

        async def chunks() -> AsyncIterator[ChatChunk]:
            yield ChatChunk(content=f"heard: {text}")
        yield chunks()


async def test_a_session_wraps_a_batch_stt_with_its_vad(autojump_clock) -> None:
    batch = WordSTT(delay=0.2)
    with pytest.raises(ValueError, match="does not stream"):
        AgentSession(stt=batch)
    session = AgentSession(stt=batch, vad=EnergyVAD(inline=True), llm=EchoLLM())
    assert isinstance(session.stt, StreamAdapter) and session.stt.stt is batch
    session.input.audio = CodedAudio([0] * 20 + [1] * 30 + [2] * 30 + [0] * 20)
    async with session:
        await session.start(Agent(instructions="x"))
        await trio.sleep(5)
    messages = [(m.role, m.text_content) for m in session.history.messages()]
    assert messages == [("user", "hello world"), ("assistant", "heard: hello world")]
