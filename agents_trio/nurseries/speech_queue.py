"""A priority queue: highest priority first, FIFO within a priority."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Generic, TypeVar

import trio

from .single_wakeup import SingleWakeup

__all__ = ["PriorityQueue"]

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    """An unbounded queue popping the highest priority first, FIFO within one.

    After :meth:`close`, items still queued are still returned; once it is
    empty, :meth:`get` and :meth:`get_nowait` raise ``trio.ClosedResourceError``.

    One consumer: a second task calling :meth:`get` while one waits there gets
    ``trio.BusyResourceError`` (the waiting consumer is parked by itself, with no parking
    lot: the queue is held for a whole session, and each full garbage collection walks
    every object it holds).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, T]] = []
        self._counter = itertools.count()
        self._wakeup = SingleWakeup()   # where the consumer waits
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[T]:
        """Iterate over a snapshot in pop order, without removing anything."""
        return iter([item for _, _, item in sorted(self._heap)])

    def put_nowait(self, item: T, priority: int) -> None:
        """Queue ``item``; a higher ``priority`` pops earlier.

        Raises:
            trio.ClosedResourceError: If the queue is closed.
        """
        if self._closed:
            raise trio.ClosedResourceError("queue is closed")
        heapq.heappush(self._heap, (-priority, next(self._counter), item))
        self._wakeup.notify()

    def get_nowait(self) -> T:
        """Pop the next item without waiting.

        Raises:
            trio.WouldBlock: If the queue is empty and open.
            trio.ClosedResourceError: If the queue is empty and closed.
        """
        if self._heap:
            return heapq.heappop(self._heap)[2]
        if self._closed:
            raise trio.ClosedResourceError("queue is closed")
        raise trio.WouldBlock

    async def get(self) -> T:
        """Pop the next item, waiting for one if the queue is empty.

        Raises:
            trio.ClosedResourceError: If the queue is (or becomes) closed and empty.
            trio.BusyResourceError: Another task waits in ``get``.

        Cancellation:
            A checkpoint. If cancelled, no item is removed.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            item = self.get_nowait()
        except trio.WouldBlock:
            pass
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return item
        while True:
            # parking is this call's schedule point: a woken getter returns in that step
            await self._wakeup.wait()
            try:
                return self.get_nowait()
            except trio.WouldBlock:
                continue   # taken by get_nowait() or removed before this step

    def remove(self, item: T) -> bool:
        """Remove the first queued occurrence (in pop order) of ``item``.

        Returns:
            True if an item equal to ``item`` was found and removed.
        """
        matches = [entry for entry in self._heap if entry[2] is item or entry[2] == item]
        if not matches:
            return False
        self._heap.remove(min(matches, key=lambda entry: entry[:2]))
        heapq.heapify(self._heap)
        return True

    def close(self) -> None:
        """Refuse new items and wake waiters once empty. Idempotent."""
        self._closed = True
        self._wakeup.notify()
