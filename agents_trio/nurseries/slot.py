"""A slot holding the latest of a series of tasks in a borrowed nursery."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from .wakeup import Wakeup

if TYPE_CHECKING:  # only in annotations (TypeVarTuple is in typing from Python 3.11)
    from typing_extensions import TypeVarTuple, Unpack

    PosArgT = TypeVarTuple("PosArgT")

__all__ = ["LatestSlot"]


class LatestSlot:
    """Runs at most one task body at a time; a new one replaces the old one.

    The slot borrows a nursery it does not own (like trio-websocket's
    ``connect_websocket(nursery, ...)``): its tasks are children of that
    nursery and end when it is cancelled.

    Each occupant runs in its own fresh cancel scope, so cancelling one never
    cancels another. A replacement's ``fn`` only starts once the previous
    occupant's ``fn`` has fully returned, finally blocks included (it waits
    until the slot's ``fn`` is no longer running), so two occupants never run at once.

    A slot holds no Trio primitive while nobody has to wait: a replacement waiting for its
    predecessor, or a task in :meth:`wait_idle`, makes the wait's parking lot (a session
    keeps several slots, and every object it holds is walked by each full garbage
    collection).

    Args:
        nursery: The nursery the slot's tasks are started in.
    """

    def __init__(self, nursery: trio.Nursery):
        self._nursery = nursery
        self._scope: trio.CancelScope | None = None
        self._tasks = 0
        self._running: trio.CancelScope | None = None  # the scope of the occupant whose fn runs
        self._changed = Wakeup()  # an occupant's fn returned, or an occupant ended

    @property
    def occupied(self) -> bool:
        """True while any task started by this slot has not finished.

        This includes a cancelled occupant that is still unwinding (running
        its ``finally``) and a replacement still waiting for it.
        """
        return self._tasks > 0

    def replace(self, fn: Callable[[Unpack[PosArgT]], Awaitable[object]],
                *args: Unpack[PosArgT]) -> None:
        """Cancel the current occupant and start ``fn(*args)`` in its place.

        Raises:
            RuntimeError: If the borrowed nursery is closed to new arrivals.

        Cancellation:
            Not a checkpoint. Owns tasks, in the borrowed nursery.
        """
        self.cancel()
        scope = trio.CancelScope()
        self._nursery.start_soon(self._run, scope, fn, args, name=fn)
        self._scope = scope
        self._tasks += 1

    def cancel(self) -> None:
        """Cancel the current occupant, if any. Sync and idempotent."""
        if self._scope is not None:
            self._scope.cancel()

    async def wait_idle(self) -> None:
        """Wait until no task started by this slot is running.

        Cancellation:
            A checkpoint; cancelling the waiter does not affect occupants.
        """
        if self._tasks == 0:
            await trio.lowlevel.checkpoint()
            return
        while self._tasks:
            await self._changed.wait()

    async def _run(
        self, scope: trio.CancelScope, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]
    ) -> None:
        try:
            with scope:
                await trio.lowlevel.checkpoint()
                while self._running is not None:  # the predecessor's fn still runs
                    await self._changed.wait()
                # replaced while it was woken: it does not start
                await trio.lowlevel.checkpoint_if_cancelled()
                self._running = scope
                try:
                    await fn(*args)
                finally:
                    self._running = None
                    self._changed.notify()
        finally:
            self._tasks -= 1
            if self._tasks == 0:
                self._changed.notify()
            if self._scope is scope:
                self._scope = None
