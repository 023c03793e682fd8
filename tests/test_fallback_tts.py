"""tts.FallbackAdapter with failing fake TTSs on virtual time: the text replayed to the next
TTS, no second voice after audio went out, resampling, events and probes."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from livekit import rtc

from agents_trio import APIConnectionError, APIStatusError
from agents_trio.nurseries import unwrap_single_error
from agents_trio.tts import FallbackAdapter


class ScriptedTTS:
    """Each segment takes the next behaviour ("ok", "fail", "fail-after-audio"); one 10 ms
    frame per text part, tagged with the part in ``heard``."""

    def __init__(self, label: str, *behaviours: str, sample_rate: int = 24000) -> None:
        self.label = label
        self.behaviours = list(behaviours)
        self.sample_rate = sample_rate
        self.num_channels = 1
        self.heard: list[list[str]] = []

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]
                     ) -> AsyncIterator[AsyncIterator[rtc.AudioFrame]]:
        behaviour = self.behaviours[min(len(self.heard), len(self.behaviours) - 1)]
        heard: list[str] = []
        self.heard.append(heard)
        yield self._frames(text, behaviour, heard)

    async def _frames(self, text: AsyncIterable[str], behaviour: str,
                      heard: list[str]) -> AsyncIterator[rtc.AudioFrame]:
        async for part in text:
            heard.append(part)
            await trio.sleep(0.05)
            if behaviour == "fail":
                raise APIStatusError("down", status_code=503, retryable=False)
            n = self.sample_rate // 100
            yield rtc.AudioFrame(b"\1\0" * n, self.sample_rate, 1, n)
            if behaviour == "fail-after-audio":
                raise APIStatusError("broke", status_code=503, retryable=False)


async def _words(*parts: str) -> AsyncIterator[str]:
    for p in parts:
        await trio.sleep(0.1)
        yield p


async def _speak(adapter: FallbackAdapter, *parts: str) -> list[rtc.AudioFrame]:
    async with adapter.stream(_words(*parts)) as frames:
        return [f async for f in frames]


async def test_the_next_tts_gets_the_whole_text_and_audio_is_resampled(
        autojump_clock: object) -> None:
    a, b = ScriptedTTS("a", "fail"), ScriptedTTS("b", "ok", sample_rate=16000)
    events: list[tuple[str, bool]] = []
    async with FallbackAdapter([a, b], max_retry_per_tts=0) as adapter:
        adapter.on("tts_availability_changed",
                   lambda ev: events.append((ev.tts.label, ev.available)))
        assert adapter.sample_rate == 24000
        frames = await _speak(adapter, "Hello ", "there.")
    assert b.heard == [["Hello ", "there."]]
    assert {f.sample_rate for f in frames} == {24000}
    assert sum(f.samples_per_channel for f in frames) == pytest.approx(480, abs=48)
    assert events[0] == ("a", False)


async def test_no_second_voice_after_audio_went_out(autojump_clock: object) -> None:
    a, b = ScriptedTTS("a", "fail-after-audio"), ScriptedTTS("b", "ok")
    async with FallbackAdapter([a, b]) as adapter:
        frames = await _speak(adapter, "one ", "two")
    assert len(frames) == 1 and b.heard == []


async def test_a_probe_with_the_segment_text_recovers(autojump_clock: object) -> None:
    a, b = ScriptedTTS("a", "fail", "ok"), ScriptedTTS("b", "ok")
    events: list[tuple[str, bool]] = []
    async with FallbackAdapter([a, b], max_retry_per_tts=0) as adapter:
        adapter.on("tts_availability_changed",
                   lambda ev: events.append((ev.tts.label, ev.available)))
        await _speak(adapter, "hi")
        await trio.sleep(1)
        assert a.heard[1] == ["hi"] and adapter.available(a)
        await _speak(adapter, "again")
    assert a.heard[2] == ["again"]
    assert events == [("a", False), ("a", True)]


async def test_all_failing_raises_and_bad_construction(autojump_clock: object) -> None:
    async with FallbackAdapter([ScriptedTTS("a", "fail"), ScriptedTTS("b", "fail")]) as adapter:
        with pytest.raises(APIConnectionError, match="all TTSs failed"), unwrap_single_error():
            await _speak(adapter, "x")
    with pytest.raises(ValueError):
        FallbackAdapter([])
    two = ScriptedTTS("b", "ok")
    two.num_channels = 2
    with pytest.raises(ValueError, match="channels"):
        FallbackAdapter([ScriptedTTS("a", "ok"), two])
