"""stt.FallbackAdapter with failing fake STTs on virtual time: failover mid-stream, open
timeout, retries, availability events, probes fed the live audio and owned by the adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from livekit import rtc

from agents_trio import APIConnectionError, APIStatusError
from agents_trio.nurseries import unwrap_single_error
from agents_trio.stt import FallbackAdapter, SpeechData, SpeechEvent, SpeechEventType


def _frame() -> rtc.AudioFrame:
    return rtc.AudioFrame(b"\0\0" * 160, 16000, 1, 160)


class _Stream:
    def __init__(self, label: str, behaviour: str) -> None:
        self.label, self.behaviour = label, behaviour
        self.frames = 0
        self._send, self._receive = trio.open_memory_channel[object](100)

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        self.frames += 1
        if self.frames % 5 == 0:  # a final transcript every 5 frames
            self._send.send_nowait(SpeechEvent(
                type=SpeechEventType.FINAL_TRANSCRIPT,
                alternatives=[SpeechData(text=f"{self.label}{self.frames // 5}")]))
            if self.behaviour == "fail-after":
                self._send.send_nowait(APIStatusError("broke", status_code=503))

    def end_input(self) -> None:
        self._send.close()

    async def __aiter__(self) -> AsyncIterator[SpeechEvent]:
        async for item in self._receive:
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, SpeechEvent)
            yield item


class ScriptedSTT:
    """Each stream takes the next behaviour ("ok", "fail-open", "hang-open", "fail-after");
    the last one repeats."""

    def __init__(self, label: str, *behaviours: str) -> None:
        self.label = label
        self.behaviours = list(behaviours)
        self.streams: list[_Stream] = []

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[_Stream]:
        behaviour = self.behaviours[min(len(self.streams), len(self.behaviours) - 1)]
        stream = _Stream(self.label, behaviour)
        self.streams.append(stream)
        await trio.sleep(0.05)
        if behaviour == "fail-open":
            raise APIStatusError("down", status_code=503)
        if behaviour == "hang-open":
            await trio.sleep_forever()
        yield stream


async def _recognize(adapter: FallbackAdapter, frames: int) -> list[str]:
    texts: list[str] = []
    async with adapter.stream() as stream:
        async def push() -> None:
            for _ in range(frames):
                stream.push_frame(_frame())
                await trio.sleep(0.1)
            stream.end_input()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(push)
            async for ev in stream:
                texts.append(ev.alternatives[0].text)
    return texts


async def test_failover_mid_stream_and_events(autojump_clock: object) -> None:
    a, b = ScriptedSTT("a", "fail-after"), ScriptedSTT("b", "ok")
    events: list[tuple[str, bool]] = []
    async with FallbackAdapter([a, b], max_retry_per_stt=0) as adapter:
        adapter.on("stt_availability_changed",
                   lambda ev: events.append((ev.stt.label, ev.available)))
        texts = await _recognize(adapter, 20)
    # a served the first 5 frames, b the 15 after the failure
    assert texts == ["a1", "b1", "b2", "b3"]
    # a's probe heard the same audio and gave a final transcript before failing again
    assert events == [("a", False), ("a", True)]


async def test_a_probe_fed_the_live_audio_recovers_the_stt(autojump_clock: object) -> None:
    a, b = ScriptedSTT("a", "fail-open", "ok"), ScriptedSTT("b", "ok")
    events: list[tuple[str, bool]] = []
    async with FallbackAdapter([a, b], max_retry_per_stt=0) as adapter:
        adapter.on("stt_availability_changed",
                   lambda ev: events.append((ev.stt.label, ev.available)))
        assert await _recognize(adapter, 10) == ["b1", "b2"]
        await trio.sleep(1)
        assert adapter.available(a)
        assert a.streams[1].frames > 0  # the probe heard the same audio
        assert await _recognize(adapter, 5) == ["a1"]
    assert events == [("a", False), ("a", True)]


async def test_open_timeout_then_retry_on_the_same_stt(autojump_clock: object) -> None:
    a, b = ScriptedSTT("a", "hang-open", "ok"), ScriptedSTT("b", "ok")
    async with FallbackAdapter([a, b], attempt_timeout=1, max_retry_per_stt=1,
                               retry_interval=0.5) as adapter:
        assert await _recognize(adapter, 5) == ["a1"]  # frames pushed meanwhile were kept
    assert len(b.streams) == 0


async def test_all_failing_raises(autojump_clock: object) -> None:
    a, b = ScriptedSTT("a", "fail-open"), ScriptedSTT("b", "fail-open")
    async with FallbackAdapter([a, b], max_retry_per_stt=0) as adapter:
        with pytest.raises(APIConnectionError, match="all STTs failed"), unwrap_single_error():
            await _recognize(adapter, 5)


async def test_leaving_the_block_ends_the_probes(autojump_clock: object) -> None:
    a, b = ScriptedSTT("a", "fail-open", "hang-open"), ScriptedSTT("b", "ok")
    with trio.fail_after(60):
        async with FallbackAdapter([a, b], max_retry_per_stt=0) as adapter:
            await _recognize(adapter, 5)
            await trio.sleep(1)
    assert not adapter.available(a)


def test_construction_errors_and_use_before_open() -> None:
    with pytest.raises(ValueError):
        FallbackAdapter([])
    with pytest.raises(RuntimeError, match="open the FallbackAdapter"):
        FallbackAdapter([ScriptedSTT("a", "ok")]).stream().__aenter__().send(None)
