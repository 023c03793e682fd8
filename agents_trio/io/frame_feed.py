"""A feed of input frames that a session can have pushed to it instead of pulling each one.

An audio input whose transport produces frames in its own task (the room's track reader, a
network) puts them into a :class:`FrameFeed`. A reader that iterates pulls them one at a time:
every frame wakes the reader's task. A session attaches itself instead
(:meth:`FrameFeed.attached`): from then on the producer's ``put`` calls the session's
synchronous frame handler in the producer's own step, so a frame costs a function call, not a
wake-up of another task. Frames keep their order across the two modes: frames buffered before
the attachment are handed over first, frames put after a detachment are buffered again.

What the attachment owns: the handler runs only while attached, in a copy of the attaching
task's context (its context variables, not the producer's); :meth:`FeedAttachment.detach`
stops it at once, with no frame in flight, which is what lets a session stop listening
synchronously. A handler that raises is detached and its error is raised in the attached task
by :meth:`FeedAttachment.wait`, never in the producer.
"""

from __future__ import annotations

import contextvars
import math
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import trio

from ..nurseries import SingleWakeup, Wakeup

__all__ = ["FeedAttachment", "FrameFeed"]

T = TypeVar("T")


class FeedAttachment(Generic[T]):
    """A consumer of a :class:`FrameFeed` (made by :meth:`FrameFeed.attached`): attached
    while its ``with`` block runs, detached on leaving it. It is its own context manager, so
    an attached consumer holds no generator or wrapper besides it.
    """

    def __init__(self, feed: FrameFeed[T], handler: Callable[[T], object]) -> None:
        self._feed = feed
        self._handler = handler
        self._context = contextvars.copy_context()
        self._ended = False
        self._end_wakeup = SingleWakeup()   # the attached task alone waits
        self._error: Exception | None = None

    def __enter__(self) -> FeedAttachment[T]:
        self._feed.attach(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.detach()

    @property
    def attached(self) -> bool:
        """Frames put now reach the handler."""
        return self._feed.consumer is self

    def deliver(self, frame: T) -> None:
        """Hand ``frame`` to the handler (the feed calls this for each frame, in order)."""
        try:
            self._context.run(self._handler, frame)
        except Exception as e:  # noqa: BLE001 - raised in the attached task by wait()
            self._error = e
            self.detach()

    def detach(self) -> None:
        """Stop receiving frames now; the attached task's :meth:`wait` returns."""
        self._feed.release(self)
        self._end()

    def input_ended(self) -> None:
        """The feed was closed: no frame will come."""
        self._end()

    def _end(self) -> None:
        self._ended = True
        self._end_wakeup.notify()

    async def wait(self) -> None:
        """Wait until the input ends or the attachment is detached.

        Raises:
            Exception: what the handler raised (it was detached then).
            trio.BusyResourceError: another task is waiting (the attached task waits).

        Cancellation: cancelling the wait changes nothing; the ``attached`` block that made
        this attachment detaches it when it exits.
        """
        if self._ended:
            await trio.lowlevel.checkpoint()
        while not self._ended:
            await self._end_wakeup.wait()
        if self._error is not None:
            raise self._error


class FrameFeed(Generic[T]):
    """Frames from one producer to one consumer, pulled (:meth:`receive`) or pushed to an
    attached handler (:meth:`attached`).

    The buffer is a plain deque and a waiting primitive is made only when a task has to wait
    (a puller for a frame, a producer for room): a feed with an attached consumer holds no
    Trio primitive at all.

    Args:
        max_buffer_size: Frames buffered for a pulling consumer before :meth:`put` waits (and
            :meth:`put_nowait` raises ``trio.WouldBlock``). Pushed frames are not buffered.
            With 0 a frame is only taken while a puller waits for it (a rendezvous).

    Raises:
        TypeError: ``max_buffer_size`` is neither an integer nor ``math.inf``.
        ValueError: ``max_buffer_size`` is negative.
    """

    def __init__(self, max_buffer_size: float = math.inf) -> None:
        if max_buffer_size != math.inf and not isinstance(max_buffer_size, int):
            raise TypeError("max_buffer_size must be an integer or math.inf")
        if max_buffer_size < 0:
            raise ValueError("max_buffer_size must be >= 0")
        self._max = max_buffer_size
        self._buffer: deque[T] = deque()
        self._pullers = 0   # tasks in receive() waiting for a frame: each is room for one
        self._changed = Wakeup()   # pullers and producers wait here
        self.consumer: FeedAttachment[T] | None = None
        self.closed = False

    # -- the producer's side -----------------------------------------------------------------
    def put_nowait(self, frame: T) -> None:
        """Hand ``frame`` over now: to the attached handler, else into the buffer.

        Raises:
            trio.WouldBlock: nobody is attached and the buffer is full.
            trio.ClosedResourceError: the feed was closed.
        """
        consumer = self.consumer
        if consumer is not None:
            consumer.deliver(frame)
            return
        if self.closed:
            raise trio.ClosedResourceError("the feed was closed")
        if len(self._buffer) >= self._max + self._pullers:
            raise trio.WouldBlock
        self._buffer.append(frame)
        self._wake()

    async def put_all(self, frames: Iterable[T]) -> None:
        """Hand ``frames`` over in order: to the attached handler in this step, else into the
        buffer, waiting for room.

        Raises:
            trio.ClosedResourceError: the feed was closed.

        Cancellation: a checkpoint; frames not handed over when it is cancelled are dropped
        by the caller (a cancelled buffered wait loses none it had accepted).
        """
        for frame in frames:
            while True:
                try:
                    self.put_nowait(frame)   # to the handler when one attached meanwhile
                except trio.WouldBlock:
                    await self._changed.wait()
                else:
                    break
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        """End the input: a pulling consumer gets the buffered frames, then the end; an
        attached one is told at once."""
        self.closed = True
        self._wake()
        consumer, self.consumer = self.consumer, None   # a closed feed pushes nothing more
        if consumer is not None:
            consumer.input_ended()

    # -- the consumer's side -----------------------------------------------------------------
    async def receive(self) -> T:
        """The next frame, pulled.

        Raises:
            trio.EndOfChannel: the feed was closed and its buffer is empty.

        Cancellation: a checkpoint; a cancelled wait loses no frame.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                frame = self.receive_nowait()
            except trio.WouldBlock:
                self._pullers += 1
                if self._max < self._pullers:
                    # the room this puller makes is the only room (a rendezvous feed): a
                    # producer waiting for it may now hand its frame over
                    self._wake()
                try:
                    await self._changed.wait()
                finally:
                    self._pullers -= 1
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return frame

    def receive_nowait(self) -> T:
        """The next buffered frame, now.

        Raises:
            trio.WouldBlock: none is buffered.
            trio.EndOfChannel: the feed was closed and its buffer is empty.
        """
        if self._buffer:
            frame = self._buffer.popleft()
            self._wake()   # room for a waiting producer
            return frame
        if self.closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _wake(self) -> None:
        """Something changed (a frame, room, the end): every waiter looks again."""
        self._changed.notify()

    def attached(self, handler: Callable[[T], object]) -> FeedAttachment[T]:
        """Have every frame pushed to ``handler`` while the returned attachment's ``with``
        block runs: the buffered ones on entering, in this task, then each as it is put, in
        the producer's task. ``handler`` must not block; leaving the block detaches.

        Raises:
            trio.BusyResourceError: on entering, another consumer is attached.
        """
        return FeedAttachment(self, handler)

    def attach(self, attachment: FeedAttachment[T]) -> None:
        """Attach ``attachment`` (entering its ``with`` block calls this) and hand it the
        buffered frames.

        Raises:
            trio.BusyResourceError: another consumer is attached.
        """
        if self.consumer is not None:
            raise trio.BusyResourceError("another consumer is attached to this feed")
        self.consumer = attachment
        self._hand_over_buffered(attachment)

    def _hand_over_buffered(self, attachment: FeedAttachment[T]) -> None:
        while attachment.attached:
            try:
                frame = self.receive_nowait()
            except trio.WouldBlock:
                return
            except trio.EndOfChannel:
                # attached to a closed feed: as close() does, no consumer stays attached to
                # it (a put is refused, not pushed to a consumer told of the end)
                self.release(attachment)
                attachment.input_ended()
                return
            attachment.deliver(frame)

    def release(self, attachment: FeedAttachment[T]) -> None:
        """Detach ``attachment`` if it is the one attached (its :meth:`FeedAttachment.detach`
        calls this)."""
        if self.consumer is attachment:
            self.consumer = None
