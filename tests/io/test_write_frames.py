"""write_frames: each write that waits is bounded by the deadline from that write's start; writes
that never wait leave the deadline scope untouched (no entry in Trio's deadline heap)."""

from __future__ import annotations

import math

import pytest
import trio
from livekit import rtc

from agents_trio.io.audio import AudioOutput, silence_frame, write_frames

FRAMES = [silence_frame(0.02) for _ in range(5)]


class RecordingOutput(AudioOutput):
    """Each write sleeps ``delay`` (0: returns without waiting) and records the deadline in
    force before and after its first wait."""

    def __init__(self, delay: float, scope: trio.CancelScope | None = None) -> None:
        super().__init__(sample_rate=16000)
        self.delay = delay
        self.scope = scope
        self.seen: list[tuple[float, float, float]] = []   # (start, before, while waiting)
        self.written = 0

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        start = trio.current_time()
        assert self.scope is not None
        before = self.scope.deadline
        if self.delay:
            await trio.sleep(self.delay / 2)
            waiting = self.scope.deadline
            await trio.sleep(self.delay / 2)
        else:
            waiting = self.scope.deadline
        self.seen.append((start, before, waiting))
        self.written += 1


async def _write(output: RecordingOutput, timeout: float) -> trio.CancelScope:
    with trio.CancelScope() as deadline:
        output.scope = deadline
        await write_frames(output, FRAMES, deadline=deadline, timeout=timeout)
        assert deadline.deadline == math.inf   # lifted on return
    return deadline


async def test_writes_that_never_wait_arm_no_deadline():
    output = RecordingOutput(delay=0.0)
    await _write(output, timeout=1.0)
    assert output.written == 5
    assert all(before == waiting == math.inf for _, before, waiting in output.seen)


async def test_a_waiting_write_is_bounded_from_its_own_start(autojump_clock):
    output = RecordingOutput(delay=0.5)
    deadline = await _write(output, timeout=1.0)
    assert not deadline.cancelled_caught and output.written == 5
    for start, _before, waiting in output.seen:
        assert start + 1.0 - 0.01 <= waiting <= start + 1.0


async def test_a_write_slower_than_the_timeout_is_cancelled_at_its_deadline(autojump_clock):
    output = RecordingOutput(delay=3.0)
    started = trio.current_time()
    deadline = await _write(output, timeout=1.0)
    assert deadline.cancelled_caught
    assert output.written == 0
    assert trio.current_time() == pytest.approx(started + 1.0)


async def test_a_failing_write_raises_through_the_deadline(autojump_clock):
    class Failing(RecordingOutput):
        async def capture_frame(self, frame: rtc.AudioFrame) -> None:
            await trio.sleep(0.1)
            raise OSError("device gone")

    with pytest.raises(OSError, match="device gone"):
        await _write(Failing(delay=0.0), timeout=1.0)
