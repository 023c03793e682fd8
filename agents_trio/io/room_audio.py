"""Audio through the LiveKit SDK: a remote track as the session's input, an ``AudioSource`` as
its output. Both talk to the SDK through the asyncio bridge and work without a room: a
``LocalAudioTrack`` made from the output's source can be read back by an input
(``AudioStream.from_track``), which is how the tests loop audio through the real SDK.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from livekit import rtc

from ..events import PlaybackFinishedEvent
from .audio import AudioInput, AudioOutput
from .bridge import AsyncioBridge, BridgeSendChannel, current_bridge
from .frame_feed import FrameFeed

__all__ = ["RoomAudioInput", "RoomAudioOutput", "open_room_audio_output"]

logger = logging.getLogger("agents_trio.room")

_CLOSE_GRACE = 2.0


async def _frames_of(stream: rtc.AudioStream) -> AsyncIterator[rtc.AudioFrame]:
    """asyncio-flavoured: the frames of an ``rtc.AudioStream``."""
    async for event in stream:
        yield event.frame


class RoomAudioInput(AudioInput):
    """The user's audio: frames of one audio track at a time, as the session's input.

    The owner (``RoomIO``, or a test) runs :meth:`serve_track` for the current track; a new
    track replaces the old one by cancelling its ``serve_track``. Iteration ends after
    :meth:`close`.

    Args:
        bridge: The bridge the SDK objects live on (default: the current one).
        sample_rate, num_channels: Format the SDK converts the track to.
        frame_size_ms: Duration of each frame.
        max_buffer_frames: Frames buffered for a slow consumer. Past that the SDK's own queue
            (``capacity`` of the ``AudioStream``, the same size) drops the oldest frames:
            live audio cannot wait.
    """

    def __init__(self, bridge: AsyncioBridge | None = None, *, sample_rate: int = 24000,
                 num_channels: int = 1, frame_size_ms: int = 50,
                 max_buffer_frames: int = 100) -> None:
        self._bridge = bridge or current_bridge()
        self.sample_rate = sample_rate
        self.num_channels = num_channels
        self.frame_size_ms = frame_size_ms
        self._max = max_buffer_frames
        self.feed: FrameFeed[rtc.AudioFrame] = FrameFeed(max_buffer_frames)
        self.failures: list[BaseException] = []

    async def serve_track(self, track: rtc.Track, *,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Forward the frames of ``track`` until it ends or the caller is cancelled.

        An SDK error inside the stream ends it (logged, kept in :attr:`failures`) instead of
        propagating: the user's next track can still be served.

        Cancellation:
            Owns one ``AudioStream``, closed on exit (shielded, bounded).
        """
        bridge = self._bridge
        stream = await bridge.run_sync(
            rtc.AudioStream.from_track, track=track, sample_rate=self.sample_rate,
            num_channels=self.num_channels, frame_size_ms=self.frame_size_ms,
            capacity=self._max)
        try:
            async with bridge.open_receive_channel(_frames_of(stream),
                                                   max_buffer_size=self._max) as frames:
                task_status.started()
                del task_status  # not kept: it holds start()'s temporary nursery
                while True:
                    try:
                        batch = await frames.receive_batch()
                    except trio.EndOfChannel:
                        return
                    except Exception as e:
                        # the SDK failed inside the stream: this track is over, the session
                        # goes on (the owner serves the next track the participant publishes)
                        logger.error("the audio track %s failed: %r", getattr(track, "sid", "?"),
                                     e)
                        self.failures.append(e)
                        return
                    await self.feed.put_all(batch)  # an attached session takes them now
        finally:
            with trio.move_on_after(_CLOSE_GRACE, shield=True):
                if not bridge.closed:
                    await bridge.run(stream.aclose)

    def close(self) -> None:
        """End the input: iteration stops after the buffered frames."""
        self.feed.close()

    async def __anext__(self) -> rtc.AudioFrame:
        """The next frame of the served track (``StopAsyncIteration`` after :meth:`close`).

        Cancellation: a checkpoint; a cancelled wait loses no frame.
        """
        try:
            return await self.feed.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None


class _Segment:
    """One flushed-or-open run of agent audio (between a first frame and its finish)."""

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = next(self._ids)
        self.pushed = 0.0       # seconds given to capture_frame
        self.captured = 0.0     # seconds the SDK accepted into its queue
        self.discarded = 0.0    # seconds dropped from the SDK queue by a pause
        self.started = False
        self.finished: PlaybackFinishedEvent | None = None
        self.waiter: trio.CancelScope | None = None

    @property
    def played_estimate(self) -> float:
        return max(0.0, self.captured - self.discarded)


class RoomAudioOutput(AudioOutput):
    """The agent's voice, played by an ``rtc.AudioSource`` (open it with
    :func:`open_room_audio_output`).

    Frames go to the SDK through a bounded bridge send channel, so a burst of TTS frames
    costs one asyncio wakeup, and consecutive frames are merged into chunks of up to
    ``max_chunk_ms`` before ``AudioSource.capture_frame`` (fewer SDK requests). The source's
    own queue is small (``queue_size_ms``), so ``clear_buffer`` silences the agent within that
    time. ``pause``/``resume`` hold the frames not yet played (the audio queued in the SDK at
    the pause is dropped, as in LiveKit's room output), which is what false-interruption
    resume needs. Frames at another sample rate are resampled.

    An SDK error while capturing silences the output and is reported once (see
    :attr:`failure`, :attr:`on_failure`); ``capture_frame`` does not raise it.

    Attributes:
        source: The ``rtc.AudioSource`` (publish it with :meth:`create_track`).
        failure: The SDK error that silenced the output, if any.
        on_failure: Called once with that error.
    """

    can_pause = True

    def __init__(self, bridge: AsyncioBridge, source: rtc.AudioSource, *, sample_rate: int,
                 num_channels: int, max_chunk_ms: int) -> None:
        super().__init__(sample_rate=sample_rate)
        self._bridge = bridge
        self.source = source
        self.num_channels = num_channels
        self._max_chunk = max_chunk_ms / 1000.0
        self._sender: BridgeSendChannel[tuple[_Segment, rtc.AudioFrame]] | None = None
        self._segment: _Segment | None = None
        self._last_finished: PlaybackFinishedEvent | None = None
        self._paused = False
        self._held: list[tuple[_Segment, rtc.AudioFrame]] = []
        self._resumed = trio.Event()
        self._resumed.set()
        self._ready = trio.Event()   # opened by RoomIO once someone subscribed
        self._ready.set()
        self._resamplers: dict[int, rtc.AudioResampler] = {}
        self.playback_finished_events: list[PlaybackFinishedEvent] = []
        self.failure: BaseException | None = None
        self.on_failure: Callable[[BaseException], Any] | None = None

    @property
    def paused(self) -> bool:
        return self._paused

    async def create_track(self, name: str = "roomio_audio") -> rtc.LocalAudioTrack:
        """A ``LocalAudioTrack`` playing this output (to publish, or to read back in tests).

        Cancellation: a checkpoint; a cancelled call returns no track (nothing is published).
        """
        return await self._bridge.run_sync(rtc.LocalAudioTrack.create_audio_track, name,
                                           self.source)

    def hold(self) -> trio.Event:
        """Hold the audio (``capture_frame`` waits) until the returned event is set.

        ``RoomIO`` holds it until someone subscribed to the agent's track, so that a greeting
        is not played to an empty room.
        """
        self._ready = trio.Event()
        return self._ready

    @asynccontextmanager
    async def open_source_pump(self, *, max_buffer_frames: int = 20) -> AsyncIterator[None]:
        """Feed the source for the block (:func:`open_room_audio_output` does this).

        Args:
            max_buffer_frames: Frames buffered on the Trio side before ``capture_frame`` waits.

        Cancellation:
            Owns the bridge pump feeding the source; leaving the block stops it and ends
            the speech it carried (:meth:`_close_playout`). Frames captured after it are
            dropped (nothing plays any more).
        """
        async with self._bridge.open_send_channel(self._consume,
                                                  max_buffer_size=max_buffer_frames
                                                  ) as sender:
            self._sender = sender
            try:
                yield
            finally:
                self._close_playout()   # before the pump closes: its users see the close first

    def _close_playout(self) -> None:
        """The pump is closing: nothing plays any more. The open segment ends, interrupted,
        where the listener stopped hearing it (which ends a wait for its playout); a frame
        still waiting for the pump, and those captured after, are dropped."""
        self._sender = None
        self._held.clear()
        segment = self._segment
        if segment is not None and segment.finished is None:
            self._finish(segment, self._heard(segment), interrupted=True)

    def _heard(self, segment: _Segment) -> float:
        """How much of ``segment`` was heard: what the SDK took, less what still waits in its
        queue (about to be dropped)."""
        return max(segment.played_estimate - self.source.queued_duration, 0.0)

    # -- capture --------------------------------------------------------------------------------
    def _failed(self, error: BaseException) -> None:
        """The SDK refused audio: the output goes silent (frames are dropped) and the failure
        is reported once, to ``on_failure`` (RoomIO closes the session with reason
        ``error``) or the log."""
        self.failure = error
        logger.error("the agent's audio output failed: %r", error)
        if self.on_failure is not None:
            self.on_failure(error)

    def _convert(self, frame: rtc.AudioFrame) -> list[rtc.AudioFrame]:
        if frame.num_channels != self.num_channels:
            raise ValueError(f"the audio output has {self.num_channels} channel(s), "
                             f"got a frame with {frame.num_channels}")
        if frame.sample_rate == self.sample_rate:
            return [frame]
        resampler = self._resamplers.get(frame.sample_rate)
        if resampler is None:
            assert self.sample_rate is not None
            resampler = rtc.AudioResampler(frame.sample_rate, self.sample_rate,
                                           num_channels=self.num_channels)
            self._resamplers[frame.sample_rate] = resampler
        return resampler.push(frame)

    def _current_segment(self) -> _Segment:
        if self._segment is None or self._segment.finished is not None:
            self._segment = _Segment()
        return self._segment

    async def wait_ready(self) -> None:
        """Wait until someone subscribed to the agent's track (see ``RoomIO``).

        Cancellation: a checkpoint.
        """
        await self._ready.wait()

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Queue ``frame`` for playout; waits while the send buffer is full.

        Cancellation: a checkpoint; a cancelled call queues nothing.
        """
        await self._ready.wait()
        sender = self._sender
        if sender is None:
            return   # the output is closed (or was never opened): nothing plays
        segment = self._current_segment()
        for converted in self._convert(frame):
            if converted.samples_per_channel == 0:
                continue
            if not segment.started and not self._paused:
                segment.started = True
                self.on_playback_started()
            segment.pushed += converted.duration
            if self._paused:
                self._held.append((segment, converted))
            elif self.failure is None:
                try:
                    await sender.send((segment, converted))
                except Exception as e:
                    if self._sender is not sender:
                        return   # the output closed while the frame waited: no failure
                    self._failed(e)

    def flush(self) -> None:
        segment = self._segment
        tail = [f for r in self._resamplers.values() for f in r.flush() if f.samples_per_channel]
        if not tail or segment is None or segment.finished is not None:
            return
        for frame in tail:
            segment.pushed += frame.duration
            if self._paused:
                self._held.append((segment, frame))
            elif self._sender is not None:
                self._sender.send_nowait((segment, frame), force=True)

    # -- the asyncio side -------------------------------------------------------------------------
    async def _consume(self, batch: list[tuple[_Segment, rtc.AudioFrame]]) -> None:
        """asyncio-flavoured: capture a batch into the source, merged into larger chunks."""
        for segment, chunk in _merge(batch, self._max_chunk):
            if segment.finished is not None:
                continue   # cleared while queued
            await self.source.capture_frame(chunk)
            segment.captured += chunk.duration
            if segment.finished is not None:
                self.source.clear_queue()   # cleared while this chunk was being captured

    # -- playout ----------------------------------------------------------------------------------
    def _finish(self, segment: _Segment, position: float, interrupted: bool
                ) -> PlaybackFinishedEvent:
        ev = self.on_playback_finished(playback_position=min(position, segment.pushed),
                                       interrupted=interrupted)
        segment.finished = ev
        self._last_finished = ev
        self.playback_finished_events.append(ev)
        if segment.waiter is not None:
            segment.waiter.cancel()
        return ev

    async def wait_for_playout(self) -> PlaybackFinishedEvent:
        """Wait until the current segment played out (or was cleared).

        Cancellation: a checkpoint; cancelling the waiter leaves the audio playing.
        """
        segment = self._segment
        if segment is None:
            await trio.lowlevel.checkpoint()
            return self._last_finished or PlaybackFinishedEvent(playback_position=0.0,
                                                                interrupted=False)
        if segment.finished is None:
            with trio.CancelScope() as scope:
                segment.waiter = scope
                await self._play_out()
                self._finish(segment, segment.played_estimate, interrupted=False)
            segment.waiter = None
        assert segment.finished is not None
        return segment.finished

    async def _play_out(self) -> None:
        """Wait until what was captured played (cancelled by the segment's end: a clear, or
        the output's close)."""
        sender = self._sender
        assert sender is not None   # an open segment: the close would have ended it
        while True:
            await self._resumed.wait()
            await sender.wait_idle()
            if sender.finished:   # the SDK failed: what was captured has played
                await self._bridge.run(self.source.wait_for_playout)
                return
            if self._paused:
                continue
            await self._bridge.run(self.source.wait_for_playout)
            if not self._paused and sender.idle and not self._held:
                return

    def clear_buffer(self) -> PlaybackFinishedEvent | None:
        """Stop the agent's audio now; returns the ``playback_finished`` event, if any."""
        segment = self._segment
        if segment is None or segment.finished is not None or segment.pushed == 0.0:
            return None   # nothing playing (a closed output ended its speech)
        assert self._sender is not None   # an open segment: the close would have ended it
        self._sender.clear()
        self._held.clear()
        position = self._heard(segment)
        if not self._bridge.closed:
            self._bridge.call_soon(self.source.clear_queue)
        for resampler in self._resamplers.values():
            resampler.flush()
        return self._finish(segment, position, interrupted=True)

    def pause(self) -> None:
        if self._paused:
            return
        self._paused = True
        self._resumed = trio.Event()
        if self._sender is not None:
            self._held[:0] = self._sender.clear()
        segment = self._segment
        if segment is not None and segment.finished is None:
            segment.discarded += self.source.queued_duration
        if not self._bridge.closed:
            self._bridge.call_soon(self.source.clear_queue)

    def resume(self) -> None:
        if not self._paused:
            return
        self._paused = False
        held, self._held = self._held, []
        segment = self._segment
        if segment is not None and segment.finished is None and not segment.started and (
                segment.pushed > 0.0):
            segment.started = True
            self.on_playback_started()
        if self._sender is not None:
            self._sender.requeue([(s, f) for s, f in held if s.finished is None])
        self._resumed.set()


def _merge(batch: list[tuple[_Segment, rtc.AudioFrame]], max_chunk: float
           ) -> list[tuple[_Segment, rtc.AudioFrame]]:
    """Join consecutive frames of one segment (same format) into chunks of ``max_chunk`` s."""
    out: list[tuple[_Segment, rtc.AudioFrame]] = []
    parts: list[rtc.AudioFrame] = []
    owner: _Segment | None = None

    def emit() -> None:
        if not parts:
            return
        if len(parts) == 1:
            out.append((owner, parts[0]))  # type: ignore[arg-type]
        else:
            first = parts[0]
            data = b"".join(bytes(p.data) for p in parts)
            samples = sum(p.samples_per_channel for p in parts)
            out.append((owner, rtc.AudioFrame(data, first.sample_rate,  # type: ignore[arg-type]
                                              first.num_channels, samples)))
        parts.clear()

    for segment, frame in batch:
        if parts and (segment is not owner or frame.sample_rate != parts[0].sample_rate
                      or sum(p.duration for p in parts) + frame.duration > max_chunk + 1e-9):
            emit()
        owner = segment
        parts.append(frame)
    emit()
    return out


@asynccontextmanager
async def open_room_audio_output(bridge: AsyncioBridge | None = None, *,
                                 sample_rate: int = 24000, num_channels: int = 1,
                                 queue_size_ms: int = 200, max_chunk_ms: int = 50,
                                 max_buffer_frames: int = 20) -> AsyncIterator[RoomAudioOutput]:
    """Open an audio output on a new ``rtc.AudioSource``.

    Args:
        bridge: The bridge (default: the current one).
        sample_rate, num_channels: Format of the source; frames at other rates are resampled.
        queue_size_ms: The SDK's queue: how much audio is committed to playout (and how long
            ``clear_buffer`` may take to be heard).
        max_chunk_ms: Frames buffered together are merged up to this duration.
        max_buffer_frames: Frames buffered on the Trio side before ``capture_frame`` waits.

    Cancellation:
        Owns the bridge pump feeding the source; leaving the block stops it and closes the
        source (shielded, bounded).
    """
    bridge = bridge or current_bridge()
    source = await bridge.run_sync(rtc.AudioSource, sample_rate, num_channels,
                                   queue_size_ms=queue_size_ms)
    output = RoomAudioOutput(bridge, source, sample_rate=sample_rate, num_channels=num_channels,
                             max_chunk_ms=max_chunk_ms)
    try:
        async with output.open_source_pump(max_buffer_frames=max_buffer_frames):
            yield output
    finally:
        with trio.move_on_after(_CLOSE_GRACE, shield=True):
            if not bridge.closed:
                await bridge.run(source.aclose)

