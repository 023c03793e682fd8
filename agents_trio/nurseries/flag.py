"""A flag that is set once and waited for, which holds no waiter collection until a task
waits."""

from __future__ import annotations

import trio

__all__ = ["Flag"]


class Flag:
    """Set once by :meth:`set`; :meth:`wait` returns once it is set.

    What ``trio.Event`` does, with the same semantics (a wait on a set flag is still a
    checkpoint; :meth:`set` wakes every waiter; a cancelled wait leaves nothing behind), but
    the collection of waiting tasks is made by the first wait and dropped when nobody waits
    any more: a flag nobody waits on is one object, where an event is two. A session holds
    many of them, mostly never waited on, and each full garbage collection walks every
    object a session holds.
    """

    __slots__ = ("_is_set", "_waiters")

    def __init__(self) -> None:
        self._is_set = False
        # the tasks waiting, in the order they came (None while there are none)
        self._waiters: dict[trio.lowlevel.Task, None] | None = None

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._is_set

    @trio.lowlevel.enable_ki_protection
    def set(self) -> None:
        """Set the flag and wake every waiting task. Idempotent; not a checkpoint."""
        if self._is_set:
            return
        self._is_set = True
        waiters, self._waiters = self._waiters, None
        if waiters is not None:
            for task in waiters:
                trio.lowlevel.reschedule(task)

    async def wait(self) -> None:
        """Wait until the flag is set (at once if it is).

        Cancellation: a checkpoint, also when the flag is set already; a cancelled wait
        changes nothing.
        """
        if self._is_set:
            await trio.lowlevel.checkpoint()
            return
        if self._waiters is None:
            self._waiters = {}
        task = trio.lowlevel.current_task()
        self._waiters[task] = None

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            # only a waiting task is aborted, so set() has not run and the dict holds it (the
            # closure keeps two cells, as trio.Event's does: a waiting flag costs what a
            # waiting event does)
            waiters = self._waiters
            assert waiters is not None
            del waiters[task]
            if not waiters:
                self._waiters = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def statistics(self) -> trio.EventStatistics:
        """How many tasks wait, as ``trio.Event.statistics()`` says it."""
        return trio.EventStatistics(tasks_waiting=len(self._waiters or ()))

    def __bool__(self) -> bool:
        raise TypeError("a Flag is not a bool: ask flag.is_set()")

    def __repr__(self) -> str:
        return f"<Flag {'set' if self._is_set else 'not set'}>"
