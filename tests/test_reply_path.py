"""What the cheaper reply path must keep (issue 13): the deadline of the audio writes covers
the writes only, never the wait for the TTS; the text stream a TTS node was given is closed
when the node ends, in the task that ran it; frames at the output's rate reach it unchanged,
others are converted."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import pytest
import trio
from livekit import rtc

from agents_trio import Agent, AgentSession, ModelSettings, SpeechHandle
from agents_trio.io.audio import silence_frame
from agents_trio.testing import FakeAudioOutput, FakeTTS, FakeTTSResponse

TEXT = "Hello there, this is a sentence."


class SlowOutput(FakeAudioOutput):
    """Every write takes ``delay``: the write deadline is armed at each write."""

    def __init__(self, delay: float, *, sample_rate: int = 24000) -> None:
        super().__init__(sample_rate=sample_rate)
        self.delay = delay
        self.rates: list[int] = []

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        self.rates.append(frame.sample_rate)
        await trio.sleep(self.delay)
        await super().capture_frame(frame)


class GappyTTSAgent(Agent):
    """A TTS node whose audio comes in bursts ``gap`` seconds apart (``rates`` gives each
    burst's sample rate)."""

    def __init__(self, gap: float, rates: list[int]) -> None:
        super().__init__(instructions="x")
        self.gap = gap
        self.rates = rates

    async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                       ) -> AsyncIterator[rtc.AudioFrame]:
        async for _ in text:
            pass
        for i, rate in enumerate(self.rates):
            if i:
                await trio.sleep(self.gap)
            for _ in range(5):
                yield silence_frame(0.02, sample_rate=rate)


def _session(output: FakeAudioOutput, **kwargs: object) -> AgentSession:
    tts = FakeTTS([FakeTTSResponse(input=TEXT, audio_duration=1.0, ttfb=0.2)])
    session = AgentSession(tts=tts, aec_warmup_duration=None, user_away_timeout=None,
                           **kwargs)  # type: ignore[arg-type]
    session.output.audio = output
    return session


async def _say_in_bursts(output: SlowOutput, *, timeout: float, bursts: int
                         ) -> tuple[SpeechHandle, list[Any]]:
    """Say TEXT through ``output`` with ``bursts`` bursts of TTS audio a second apart and the
    given write deadline; the speech and the session's error events."""
    session = _session(output, audio_write_timeout=timeout)
    errors: list[Any] = []
    session.on("error", errors.append)
    with trio.fail_after(60):
        async with session:
            await session.start(GappyTTSAgent(gap=1.0, rates=[24000] * bursts))
            handle = session.say(TEXT)
            await handle.wait_for_playout()
    return handle, errors


async def test_waiting_for_the_tts_between_bursts_is_not_a_stall(autojump_clock):
    output = SlowOutput(delay=0.04)
    handle, errors = await _say_in_bursts(output, timeout=0.05, bursts=3)
    # three bursts a second apart, each write within its 0.05 s: nothing stalled
    assert not handle.interrupted and not errors
    assert len(output.rates) == 15
    (finished,) = output.playback_finished_events
    assert not finished.interrupted


async def test_a_write_slower_than_the_deadline_after_a_gap_still_stalls(autojump_clock):
    output = SlowOutput(delay=0.3)
    handle, errors = await _say_in_bursts(output, timeout=0.25, bursts=2)
    assert handle.interrupted
    assert [type(e.error).__name__ for e in errors] == ["AudioOutputStalled"]
    assert output.rates == [24000]  # the first write was cancelled at its deadline


async def test_frames_at_the_output_rate_pass_and_others_are_converted(autojump_clock):
    output = SlowOutput(delay=0.0, sample_rate=24000)
    session = _session(output)
    with trio.fail_after(60):
        async with session:
            await session.start(GappyTTSAgent(gap=0.1, rates=[24000, 16000, 24000]))
            handle = session.say(TEXT)
            await handle.wait_for_playout()
    assert set(output.rates) == {24000}
    # 15 frames of 20 ms: 0.3 s whatever their rate (the converter's tail included)
    (finished,) = output.playback_finished_events
    assert abs(finished.playback_position - 0.3) < 0.011


async def test_the_tts_text_stream_is_closed_in_the_task_that_ran_the_node(autojump_clock):
    closed_in: list[str] = []

    async def upper(text: AsyncIterable[str]) -> AsyncIterator[str]:
        try:
            async for chunk in text:
                yield chunk.upper()
        finally:
            closed_in.append(trio.lowlevel.current_task().name)

    class FirstChunkOnly(Agent):
        """A TTS node that stops reading its text after the first chunk."""

        async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                           ) -> AsyncIterator[rtc.AudioFrame]:
            async for _ in text:
                break
            yield silence_frame(0.02, sample_rate=24000)

    output = FakeAudioOutput()
    session = _session(output, tts_text_transforms=[upper])
    with trio.fail_after(60):
        async with session:
            await session.start(FirstChunkOnly(instructions="x"))
            handle = session.say(TEXT)
            await handle.wait_for_playout()
            assert closed_in == ["agents_trio.generation.Generation._tts"]


async def test_a_frame_queue_hands_over_bursts_and_loses_nothing_to_a_cancelled_take(
        autojump_clock):
    from agents_trio.generation import FrameQueue

    frames = [silence_frame(0.02, sample_rate=24000) for _ in range(5)]
    queue = FrameQueue()
    with trio.move_on_after(1.0) as scope:
        await queue.take(2)  # nothing yet: waits, and the cancel takes nothing
    assert scope.cancelled_caught
    for f in frames[:3]:
        queue.send_nowait(f)
    assert await queue.take(2) == frames[:2]
    taken: list[object] = []

    async def taker() -> None:
        while True:
            burst = await queue.take(10)
            taken.append(burst)
            if burst is None:
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(taker)  # takes the one waiting, then waits
        await trio.sleep(0.1)
        queue.send_nowait(frames[3])
        queue.send_nowait(frames[4])  # sent before the taker ran: one burst
        queue.close()
    assert taken == [[frames[2]], [frames[3], frames[4]], None]
    assert [f async for f in queue] == []
    with pytest.raises(trio.ClosedResourceError):
        queue.send_nowait(frames[0])
