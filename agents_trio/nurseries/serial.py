"""A queue of work items handled one at a time by a task that exists only while there is work."""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

__all__ = ["SerialWorker"]

T = TypeVar("T")


class SerialWorker(Generic[T]):
    """Handles submitted items one at a time, in the order they were submitted.

    The handling runs in a task of a borrowed nursery (like :class:`LatestSlot`'s), started
    when an item arrives with no worker running and ending when the queue is empty. An
    object that waits for occasional work therefore holds no task, channel or parked
    coroutine between items: a session keeps several such queues, and every object it holds
    is walked by each full garbage collection.

    The worker runs in the context (context variables) of the task that bound the nursery,
    not of whoever submitted the item, as a long-lived consumer task started there would.

    Args:
        handle: Called with each item; the next item waits until it returns. What it raises
            ends the worker and propagates into the nursery, like a consumer task's error.
        name: The worker task's name.
    """

    def __init__(self, handle: Callable[[T], Awaitable[object]], *, name: str) -> None:
        self._handle = handle
        self._name = name
        self._queue: deque[T] | None = None   # made by an item, dropped once handled
        self._nursery: trio.Nursery | None = None
        self._context: contextvars.Context | None = None
        self._worker_running = False
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: no item is accepted any more."""
        return self._closed

    @property
    def waiting(self) -> int:
        """Items submitted and not taken by the worker yet."""
        return len(self._queue or ())

    def bind(self, nursery: trio.Nursery) -> None:
        """Run the worker in ``nursery`` from now on (items already submitted start it).

        Cancellation: not a checkpoint. Cancelling ``nursery`` cancels the worker; the items
        it had not taken stay unhandled.
        """
        self._nursery = nursery
        self._context = contextvars.copy_context()
        self._start_worker()

    def submit(self, item: T) -> None:
        """Queue ``item``; the worker handles it after the ones before it.

        Raises:
            trio.ClosedResourceError: :meth:`close` was called.
            RuntimeError: The bound nursery is closed (Trio's error); the item is not kept.
        """
        if self._closed:
            raise trio.ClosedResourceError("the worker takes no more items")
        if self._queue is None:
            self._queue = deque()
        self._queue.append(item)
        try:
            self._start_worker()
        except BaseException:
            self._queue.pop()   # refused: nothing would ever handle it
            raise

    def close(self) -> None:
        """Accept no more items; the queued ones are still handled. Idempotent."""
        self._closed = True

    def _start_worker(self) -> None:
        if self._worker_running or not self._queue or self._nursery is None:
            return
        assert self._context is not None
        # a task copies the context of the task that starts it: start it from the binder's
        nursery = self._nursery
        self._context.run(lambda: nursery.start_soon(self._work, name=self._name))
        self._worker_running = True

    async def _work(self) -> None:
        try:
            while self._queue:
                await self._handle(self._queue.popleft())
            self._queue = None   # an idle worker holds no queue
        finally:
            self._worker_running = False
