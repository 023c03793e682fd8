"""A place where one task waits until something changes, holding nothing but that task."""

from __future__ import annotations

import trio

__all__ = ["SingleWakeup"]


class SingleWakeup:
    """One task waits in :meth:`wait` until the next :meth:`notify`, then looks again at what
    it waits for.

    :class:`Wakeup` for an object only its owner task waits on: the task is parked by itself
    (``trio.lowlevel.wait_task_rescheduled``), with no ``ParkingLot`` and no lot's frames under
    it. A parked task is walked by every full garbage collection, so a long wait (an input
    attached for a whole session) costs a few objects instead of a dozen.
    """

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    async def wait(self) -> None:
        """Wait for the next :meth:`notify`.

        Raises:
            trio.BusyResourceError: another task is waiting.

        Cancellation: a checkpoint; a cancelled wait changes nothing.
        """
        if self._task is not None:
            raise trio.BusyResourceError("another task waits on this SingleWakeup")
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, raise_cancel: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def notify(self) -> None:
        """Wake the waiting task, if any. Not a checkpoint."""
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)
