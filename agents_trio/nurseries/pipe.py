"""An unbounded queue from any number of senders to one receiving task."""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

import trio

from .single_wakeup import SingleWakeup

__all__ = ["Pipe"]

T = TypeVar("T")


class Pipe(Generic[T]):
    """Items go in with :meth:`send_nowait` (never waits) and come out in order, to one
    receiving task at a time, until :meth:`close` and the last item.

    It does what an unbounded ``trio.open_memory_channel`` pair does for a producer and its
    one consumer, with three objects (the pipe, its deque and a :class:`SingleWakeup`) where a
    channel pair holds eight (two endpoints, their state, two task sets, two task queues and a
    deque), waiting or not.
    That matters for the pipes a speech makes on every turn: each full garbage collection
    walks every object a live session holds. The receiving side behaves the same: a receive is
    a checkpoint, waits only when the pipe is empty, and a cancelled receive takes nothing.
    Two tasks receiving at once is an error (``trio.BusyResourceError``).

    ``async with`` closes it (as a send channel's does); ``async for`` receives until the end.
    """

    __slots__ = ("_items", "_closed", "_changed")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._closed = False
        self._changed = SingleWakeup()  # the receiver waits there for an item or the close

    def send_nowait(self, item: T) -> None:
        """Append ``item``; a waiting receiver wakes. Not a checkpoint.

        Raises:
            trio.ClosedResourceError: The pipe was closed.
        """
        if self._closed:
            raise trio.ClosedResourceError("the pipe was closed")
        self._items.append(item)
        self._changed.notify()

    def close(self) -> None:
        """No more items: the receiver takes what is left, then sees the end. Idempotent."""
        self._closed = True
        self._changed.notify()

    def receive_nowait(self) -> T:
        """The next item, without a schedule point.

        Raises:
            trio.WouldBlock: The pipe is empty and open.
            trio.EndOfChannel: The pipe is empty and closed.
        """
        if self._items:
            return self._items.popleft()
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> T:
        """The next item, waiting for one if the pipe is empty.

        Cancellation: a checkpoint; a cancelled receive takes nothing.

        Raises:
            trio.EndOfChannel: The pipe was closed and every item received.
        """
        await self._ready()
        return self.receive_nowait()

    async def take(self, limit: int) -> list[T] | None:
        """Up to ``limit`` items (at least one, waiting for it), or None once the pipe was
        closed and emptied.

        Cancellation: a checkpoint; a cancelled call takes nothing.
        """
        await self._ready()
        items = self._items
        if not items:
            return None  # closed and empty
        return [items.popleft() for _ in range(min(limit, len(items)))]

    async def _ready(self) -> None:
        """A schedule point, and a wait until an item or the close is there; the caller takes
        in the step this returns in.

        Cancellation: a checkpoint; a cancelled call takes nothing.
        """
        if self._items or self._closed:
            await trio.lowlevel.checkpoint()
        # what was there may be gone after that schedule point (another task's receive_nowait()
        # or receive took it): the condition is looked at again in the step that takes, never
        # carried over a schedule point. A second receiver waiting at once:
        # trio.BusyResourceError
        while not (self._items or self._closed):
            await self._changed.wait()

    async def __aenter__(self) -> Pipe[T]:
        """The pipe, for sending.

        Cancellation: returns at once, not a checkpoint."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the pipe (:meth:`close`).

        Cancellation: closes at once, not a checkpoint."""
        self.close()

    def __aiter__(self) -> Pipe[T]:
        return self

    async def __anext__(self) -> T:
        """The next item (see :meth:`receive`).

        Cancellation: a checkpoint; a cancelled call takes nothing."""
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
