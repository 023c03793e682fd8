"""Audio input and output ends of a session.

An ``AudioOutput`` is where the agent's voice goes. The session waits for ``wait_ready``,
writes frames with ``capture_frame`` (each write has a deadline, the session's
``audio_write_timeout``), marks the end of a segment with ``flush``, waits for it with
``wait_for_playout``, and stops it with ``clear_buffer``. Outputs report playback with the
``playback_started`` and ``playback_finished`` events.
"""

from __future__ import annotations

import math
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Sequence
from typing import Any, overload

import numpy as np
import trio
from livekit import rtc

from .._errors import AgentsTrioError
from ..events import PlaybackFinishedEvent, PlaybackStartedEvent
from ..nurseries import EventFanout
from ..nurseries.fanout import CallbackT
from .frame_feed import FrameFeed


def silence_frame(duration: float, *, sample_rate: int = 16000, num_channels: int = 1
                  ) -> rtc.AudioFrame:
    """A frame of ``duration`` seconds of silence."""
    samples = int(round(duration * sample_rate))
    data = np.zeros(samples * num_channels, dtype=np.int16)
    return rtc.AudioFrame(data.tobytes(), sample_rate, num_channels, samples)


class AudioOutputStalled(AgentsTrioError):
    """An audio output's ``capture_frame`` did not return within the write deadline
    (``AgentSession(audio_write_timeout=...)``).

    Args:
        timeout: The deadline that was missed, in seconds.
    """

    def __init__(self, timeout: float) -> None:
        super().__init__(f"the audio output did not accept a frame within {timeout:g} s")
        self.timeout = timeout


async def capture_frames(output: AudioOutput, frames: Sequence[rtc.AudioFrame], *,
                         timeout: float | None) -> None:
    """Write ``frames`` to ``output`` once it is ready (``wait_ready``, unbounded); each
    ``capture_frame`` must then return within ``timeout`` seconds (None: no deadline).

    Raises:
        AudioOutputStalled: a write missed its deadline (it was cancelled; the frames after it
            were not written).

    Cancellation: cancelling the caller cancels the write in progress.
    """
    with trio.CancelScope() as deadline:
        await output.wait_ready()
        await write_frames(output, frames, deadline=deadline, timeout=timeout)
    if deadline.cancelled_caught:
        assert timeout is not None  # no deadline was set otherwise
        raise AudioOutputStalled(timeout)


async def write_frames(output: AudioOutput, frames: Sequence[rtc.AudioFrame], *,
                       deadline: trio.CancelScope, timeout: float | None) -> None:
    """Write ``frames`` to ``output``, each ``capture_frame`` within ``timeout`` seconds (None:
    no deadline), under the caller's ``deadline`` scope, which is lifted (``inf``) again on
    return. A caller writing bursts keeps one scope for all of them and waits between them
    (for the next frames, for ``wait_ready``) with no deadline: entering a scope per burst
    costs more than moving its deadline. A missed deadline cancels the write in progress:
    the caller's scope catches it (``cancelled_caught``; see ``AudioOutputStalled``).

    Cancellation: cancelling the caller (or the deadline) cancels the write in progress; the
    frames after it are not written.
    """
    if timeout is None:
        for frame in frames:
            await output.capture_frame(frame)
        return
    # A deadline only matters to a write that waits: it is armed when a write is about to
    # wait, at that write's start + timeout. Every move of a deadline leaves an entry in
    # Trio's deadline heap until that time passes, so a burst of writes that never wait (an
    # output that queues) moves it not at all; while writes do wait, it is moved only when
    # the clock moved by more than 1 % of the timeout since the last move (a waiting write
    # is cancelled at most 1 % of the timeout early).
    slack = timeout / 100
    armed = _WriteDeadline(deadline, timeout, slack)
    for frame in frames:
        armed.write_started()
        await _arming_on_wait(output.capture_frame(frame), armed)
    if armed.moved:
        deadline.deadline = math.inf


class _WriteDeadline:
    """Arms a write deadline scope for the write in progress (see ``write_frames``)."""

    __slots__ = ("_deadline", "_set_at", "_slack", "_started_at", "_timeout", "moved")

    def __init__(self, deadline: trio.CancelScope, timeout: float, slack: float) -> None:
        self._deadline = deadline
        self._timeout = timeout
        self._slack = slack
        self._set_at = -math.inf
        self._started_at = 0.0
        self.moved = False

    def write_started(self) -> None:
        self._started_at = trio.current_time()

    def __call__(self) -> None:
        """The write in progress is about to wait: its deadline is its start + timeout."""
        start = self._started_at
        if start - self._set_at > self._slack:
            self._deadline.deadline = start + self._timeout
            self._set_at = start
            self.moved = True


@types.coroutine
def _arming_on_wait(coro: Coroutine[Any, Any, None], arm: Callable[[], None]
                    ) -> Generator[Any, Any, None]:
    """Await ``coro`` as ``await coro`` would, calling ``arm()`` in the step in which it
    first suspends (before the scheduler sees it wait); a coroutine that finishes without
    suspending never calls it."""
    try:
        trap = coro.send(None)
    except StopIteration:
        return
    arm()
    while True:
        try:
            sent = yield trap
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the coroutine, as await does
            try:
                trap = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                trap = coro.send(sent)
            except StopIteration:
                return


class AudioInput:
    """Where the user's audio comes from: an async iterator of ``rtc.AudioFrame``.

    An input whose frames come through a :class:`~agents_trio.io.frame_feed.FrameFeed` sets
    :attr:`feed` to it: the session then attaches to the feed and has each frame pushed to it
    in the producer's step instead of pulling it (the iteration stays for other readers).
    """

    #: The feed this input's frames come through, when the session may attach to it.
    feed: FrameFeed[rtc.AudioFrame] | None = None

    def __aiter__(self) -> AsyncIterator[rtc.AudioFrame]:
        return self

    async def __anext__(self) -> rtc.AudioFrame:  # pragma: no cover - abstract
        """The next frame of the user's audio; ``StopAsyncIteration`` once the input ended.

        Cancellation: implementations wait on a channel: a cancelled wait loses no frame.
        """
        raise StopAsyncIteration


class AudioOutput:
    """Base class of audio sinks for the agent's voice.

    Subclasses implement ``capture_frame``, ``flush``, ``clear_buffer`` and
    ``wait_for_playout``; pausable ones set ``can_pause`` and implement ``pause``/``resume``.
    """

    can_pause: bool = False

    def __init__(self, *, sample_rate: int | None = None) -> None:
        self.sample_rate = sample_rate
        self._events = EventFanout()

    @overload
    def on(self, name: str, callback: CallbackT) -> CallbackT: ...

    @overload
    def on(self, name: str, callback: None = None) -> Callable[[CallbackT], CallbackT]: ...

    def on(self, name: str, callback: CallbackT | None = None
           ) -> CallbackT | Callable[[CallbackT], CallbackT]:
        """Register ``callback`` for ``name`` (``playback_started``, ``playback_finished``);
        without one, return a decorator."""
        return self._events.on(name, callback) if callback else self._events.on(name)

    def off(self, name: str, callback: Callable[[Any], Any]) -> None:
        self._events.off(name, callback)

    def on_playback_started(self, *, created_at: float | None = None) -> None:
        ev = PlaybackStartedEvent() if created_at is None else PlaybackStartedEvent(
            created_at=created_at)
        self._events.emit("playback_started", ev)

    def on_playback_finished(self, *, playback_position: float, interrupted: bool,
                             synchronized_transcript: str | None = None) -> PlaybackFinishedEvent:
        ev = PlaybackFinishedEvent(playback_position=playback_position, interrupted=interrupted,
                                   synchronized_transcript=synchronized_transcript)
        self._events.emit("playback_finished", ev)
        return ev

    async def wait_ready(self) -> None:
        """Wait until the output takes frames (the room output: until someone subscribed to
        the agent's track). This wait is not bounded by the session's write deadline.

        Cancellation: the default returns at once and is not a checkpoint (it is awaited
        before every burst of frames, next to writes that are).
        """

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Queue ``frame`` for playout (it may wait while the output's buffer is full).

        Cancellation: a cancelled call queues nothing; what was queued before plays on
        (``clear_buffer`` stops it).
        """
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def clear_buffer(self) -> PlaybackFinishedEvent | None:
        """Stop playback at once; returns the ``playback_finished`` event it emitted, if any."""
        raise NotImplementedError

    async def wait_for_playout(self) -> PlaybackFinishedEvent:
        """Wait until the flushed segment has played (or was cleared).

        Cancellation: a checkpoint; cancelling the waiter leaves the audio playing.
        """
        raise NotImplementedError

    def pause(self) -> None:
        raise RuntimeError(f"{type(self).__name__} cannot pause")

    def resume(self) -> None:
        raise RuntimeError(f"{type(self).__name__} cannot pause")


class TextOutput:
    """Where the agent's transcription goes (``output.transcription``).

    ``synchronized`` (default True): the words are released as the agent's audio plays
    (LiveKit's transcript synchronizer); False sends the text as it is generated
    (``TextOutputOptions(sync_transcription=False)``)."""

    synchronized: bool = True

    async def capture_text(self, text: str) -> None:
        """Add ``text`` to the current segment (``flush`` ends it).

        Cancellation: the default keeps nothing and returns at once; an implementation that
        waits drops the text of a cancelled call.
        """

    def flush(self) -> None:
        pass
