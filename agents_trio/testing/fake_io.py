"""Fake audio input and output with a virtual playout clock."""

from __future__ import annotations

import trio
from livekit import rtc

from ..events import PlaybackFinishedEvent
from ..io.audio import AudioInput, AudioOutput, TextOutput, silence_frame
from ..io.frame_feed import FrameFeed


class FakeAudioInput(AudioInput):
    """User audio pushed by the test: ``push(0.1)`` sends 0.1 s of silence.

    Args:
        sample_rate: Of the frames.
        attachable: Offer a :attr:`feed` the session attaches to, as the room's input does
            (each frame then reaches the session in the test's own step); False: the session
            pulls every frame through the iteration, as from a plain async iterator.
    """

    def __init__(self, *, sample_rate: int = 16000, attachable: bool = True) -> None:
        self.sample_rate = sample_rate
        self._frames: FrameFeed[rtc.AudioFrame] = FrameFeed()
        if attachable:
            self.feed = self._frames

    def push(self, duration: float) -> None:
        self._frames.put_nowait(silence_frame(duration, sample_rate=self.sample_rate))

    def close(self) -> None:
        self._frames.close()

    async def __anext__(self) -> rtc.AudioFrame:
        try:
            return await self._frames.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class FakeAudioOutput(AudioOutput):
    """Plays frames on Trio's clock: a segment starts with its first captured frame and ends
    when its pushed duration has played; ``pause`` freezes the clock.

    ``playback_finished_events`` records every finished segment for assertions.
    """

    def __init__(self, *, can_pause: bool = False, sample_rate: int = 24000) -> None:
        super().__init__(sample_rate=sample_rate)
        self.can_pause = can_pause
        self.playback_finished_events: list[PlaybackFinishedEvent] = []
        self._changed = trio.Event()
        self._reset()
        self._paused_at: float | None = None

    def _reset(self) -> None:
        self._pushed = 0.0
        self._started_at: float | None = None
        self._paused_total = 0.0
        self._flushed = False
        self._finished: PlaybackFinishedEvent | None = None

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def _played(self) -> float:
        if self._started_at is None:
            return 0.0
        now = self._paused_at if self._paused_at is not None else trio.current_time()
        return min(self._pushed, max(0.0, now - self._started_at - self._paused_total))

    def _start_playback(self) -> None:
        self._started_at = trio.current_time()
        self._paused_total = 0.0
        self.on_playback_started()

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Add ``frame``'s duration to the segment (starting it with the first frame).

        Cancellation: not a checkpoint; the frame is always taken.
        """
        if self._finished is not None:
            self._reset()
        if self._pushed == 0.0 and self._started_at is None and self._paused_at is None:
            self._start_playback()
        self._pushed += frame.duration
        self._wake()

    def flush(self) -> None:
        self._flushed = True
        self._wake()

    def _finish(self, position: float, interrupted: bool) -> PlaybackFinishedEvent:
        ev = self.on_playback_finished(playback_position=position, interrupted=interrupted)
        self.playback_finished_events.append(ev)
        self._reset()
        self._finished = ev
        self._wake()
        return ev

    def clear_buffer(self) -> PlaybackFinishedEvent | None:
        if self._pushed == 0.0:
            return None
        return self._finish(self._played(), interrupted=True)

    async def wait_for_playout(self) -> PlaybackFinishedEvent:
        """Wait until the flushed segment has played on Trio's clock (or was cleared).

        Cancellation: a checkpoint; cancelling the waiter leaves the segment playing, and
        the next call reports it.
        """
        while True:
            if self._finished is not None:
                ev, self._finished = self._finished, None
                self._reset()
                return ev
            changed = self._changed
            if (self._flushed and self._started_at is not None and self._paused_at is None):
                remaining = self._pushed - self._played()
                if remaining <= 1e-9:
                    self._finish(self._pushed, interrupted=False)
                    continue
                with trio.move_on_after(remaining):
                    await changed.wait()
            else:
                await changed.wait()

    def pause(self) -> None:
        if self._paused_at is None:
            self._paused_at = trio.current_time()
            self._wake()

    def resume(self) -> None:
        if self._paused_at is None:
            return
        paused_for = trio.current_time() - self._paused_at
        self._paused_at = None
        if self._started_at is None:
            if self._pushed > 0.0:
                self._start_playback()
        else:
            self._paused_total += paused_for
        self._wake()


class FakeTextOutput(TextOutput):
    """Collects the agent's transcription: ``messages`` gets one entry per flush."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self._buffer = ""

    async def capture_text(self, text: str) -> None:
        """Append ``text`` to the current message. Cancellation: not a checkpoint; the text
        is always kept."""
        self._buffer += text

    def flush(self) -> None:
        self.messages.append(self._buffer)
        self._buffer = ""

    def __repr__(self) -> str:
        return f"FakeTextOutput(messages={self.messages!r})"


