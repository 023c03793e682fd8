"""A nursery owned by one object, with a bounded grace period for cleanup."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING

import trio

from .flag import Flag

__all__ = ["TaskOwner", "open_owner"]

if TYPE_CHECKING:  # only in annotations (TypeVarTuple is in typing from Python 3.11)
    from typing_extensions import TypeVarTuple, Unpack

    PosArgT = TypeVarTuple("PosArgT")


class TaskOwner:
    """Owns one nursery; every task it starts lives in that nursery.

    Create it with :func:`open_owner`. Cancelling the owner cancels the
    nursery's own cancel scope, i.e. every child *and* the body of the
    ``async with open_owner()`` block, exactly like ``nursery.cancel_scope``.

    Attributes:
        grace: Seconds a child's ``finally`` block may keep running under
            :meth:`cleanup_scope` after the child was cancelled.
        name: Optional label, for debugging only.
    """

    def __init__(self, nursery: trio.Nursery, *, closed: Flag, grace: float = 5.0,
                 name: str | None = None) -> None:
        self._nursery = nursery
        self._closed = closed  # set by whoever owns the nursery (open_owner) when it exits
        self.grace = grace
        self.name = name

    @property
    def nursery(self) -> trio.Nursery:
        """The owned nursery (e.g. to lend to a :class:`LatestSlot`)."""
        return self._nursery

    @property
    def closed(self) -> bool:
        """True once the owner's nursery has exited."""
        return self._closed.is_set()

    def start_soon(
        self, fn: Callable[[Unpack[PosArgT]], Awaitable[object]], *args: Unpack[PosArgT],
        name: str | None = None,
    ) -> None:
        """Start ``fn(*args)`` as a child task.

        Raises:
            RuntimeError: If the owner's nursery is closed to new arrivals.
        """
        self._nursery.start_soon(fn, *args, name=name)

    async def start(
        self, fn: Callable[..., Awaitable[object]], *args: object, name: str | None = None
    ) -> object:
        """Start ``fn(*args, task_status=...)`` and wait until it calls ``started``.

        Returns:
            The value the child passed to ``task_status.started()``.

        Cancellation:
            A checkpoint. Cancelling the caller before ``started`` is called
            cancels the child too (see ``trio.Nursery.start``).
        """
        return await self._nursery.start(fn, *args, name=name)

    def cancel(self) -> None:
        """Cancel every child (and the owning block's body). Idempotent, sync.

        This is the way to shut the owner down from inside one of its own
        tasks.
        """
        self._nursery.cancel_scope.cancel()

    def cleanup_scope(self) -> trio.CancelScope:
        """A shielded scope for a child's ``finally``, bounded by :attr:`grace`.

        Usage::

            finally:
                with owner.cleanup_scope():
                    await flush()

        The grace period is counted from entering the scope.
        """
        return trio.move_on_after(self.grace, shield=True)

    async def wait_closed(self) -> None:
        """Wait until the owner's nursery has exited.

        Cancellation:
            A checkpoint; cancelling the waiter does not affect the owner.
        """
        await self._closed.wait()

    async def aclose(self) -> None:
        """Cancel all children and wait until the nursery has exited. Idempotent.

        Raises:
            RuntimeError: If called from inside the owner (the body of its
                ``async with`` block, one of its children, or a task nested
                below them), where waiting would deadlock. Use :meth:`cancel`
                there instead.

        Cancellation:
            A checkpoint. If the caller is cancelled while waiting, the owner
            stays cancelled and keeps shutting down on its own.
        """
        if not self.closed and self._called_from_inside():
            raise RuntimeError("TaskOwner.aclose() called from inside the owner; use cancel()")
        self.cancel()
        await self._closed.wait()

    def _called_from_inside(self) -> bool:
        body = self._nursery.parent_task
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        while task is not None:
            if task is body or task.eventual_parent_nursery is self._nursery:
                return True
            parent = task.parent_nursery
            if parent is None:
                return False
            if parent is self._nursery:
                return True
            if parent.parent_task is body:
                # ``body`` may have opened ``parent`` before or inside our block;
                # a task's open nurseries are strictly nested, in opening order.
                opened = body.child_nurseries
                return opened.index(parent) > opened.index(self._nursery)
            task = parent.parent_task
        return False


def open_owner(*, grace: float = 5.0, name: str | None = None
               ) -> AbstractAsyncContextManager[TaskOwner]:
    """Open a nursery and yield a :class:`TaskOwner` for it.

    Leaving the block normally waits for all children, like a nursery. An
    exception or cancellation in the body cancels the children. Errors from
    children (and from the body) escape as the nursery's ``ExceptionGroup``
    under Trio's default ``strict_exception_groups=True``.

    Args:
        grace: Default for :attr:`TaskOwner.grace`.
        name: Optional label for the owner.

    Cancellation:
        Owns tasks. Entering is not a checkpoint; leaving is, like a nursery.
    """
    return _OwnerBlock(grace, name)


class _OwnerBlock:
    """The block :func:`open_owner` returns. A class rather than a generator: an owner is
    often held for a whole session, and a generator-based block would keep its generator,
    its frame and its context manager alive (walked by every full garbage collection)."""

    __slots__ = ("_closed", "_grace", "_name", "_nursery_block")

    def __init__(self, grace: float, name: str | None) -> None:
        self._grace = grace
        self._name = name
        self._closed = Flag()
        self._nursery_block: AbstractAsyncContextManager[trio.Nursery] | None = None

    async def __aenter__(self) -> TaskOwner:
        if self._nursery_block is not None:
            raise RuntimeError("an open_owner() block is entered once")
        self._nursery_block = block = trio.open_nursery()
        nursery = await block.__aenter__()
        return TaskOwner(nursery, closed=self._closed, grace=self._grace, name=self._name)

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> bool | None:
        block = self._nursery_block
        assert block is not None
        try:
            return await block.__aexit__(exc_type, exc, tb)
        finally:
            self._closed.set()
