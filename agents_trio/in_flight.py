"""What is in flight in a session: the tool calls running, and the AgentTasks awaited inline.

The session owns one of each. Its close reads them: it cancels the inline tasks innermost
first (so every awaiting tool or hook gets a ``ToolError`` rather than a bare cancellation),
and it names the tool calls that still run once its grace has passed (a tool that shields
itself from cancellation holds the close up; Trio cannot break a shield, so the overrun is
reported instead).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

import trio

from .chat import FunctionCall
from .nurseries import Wakeup


class RunningTools:
    """The tool calls dispatched and not finished, in the order they were dispatched, each
    with the activity that runs it (one registry for the session: an activity asks it whether
    its own tools run, the close asks it which tools hold it up)."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[FunctionCall, object]] = {}
        self._finished = Wakeup()

    def add(self, call: FunctionCall, owner: object) -> None:
        self._calls[id(call)] = (call, owner)

    def discard(self, call: FunctionCall) -> None:
        if self._calls.pop(id(call), None) is not None:
            self._finished.notify()

    def owned_by(self, owner: object) -> bool:
        """Whether a call of ``owner`` is running."""
        return any(o is owner for _, o in self._calls.values())

    def of_agent(self, agent: object) -> bool:
        """Whether a call of an activity of ``agent`` is running."""
        return any(getattr(o, "agent", None) is agent for _, o in self._calls.values())

    async def wait_none_of(self, agent: object) -> None:
        """Wait until no call of an activity of ``agent`` runs.

        Cancellation: a checkpoint only.
        """
        await trio.lowlevel.checkpoint()
        while self.of_agent(agent):
            await self._finished.wait()

    def names(self) -> list[str]:
        return [call.name for call, _ in self._calls.values()]


class Cancellable(Protocol):
    """An AgentTask as the stack sees it."""

    def cancel(self) -> None: ...


class InlineTaskStack:
    """The AgentTasks awaited inline that have not returned yet, outermost first.

    A task is on the stack from the moment its awaiter commits to running it (before any
    checkpoint) until the awaiter has resumed its parent, so a close that unwinds the stack
    cannot miss a task that is still starting or already returning.
    """

    def __init__(self) -> None:
        # each task with its goodbye (what the close awaits before cancelling it) and the
        # activity that awaited it
        self._tasks: list[tuple[Cancellable, Callable[[], Awaitable[None]], object]] = []
        self._changed = Wakeup()

    @contextmanager
    def enter(self, task: Cancellable, goodbye: Callable[[], Awaitable[None]],
              awaiter: object) -> Iterator[None]:
        """``task``, awaited by ``awaiter`` (an activity), is on the stack for the block; the
        close awaits ``goodbye()`` (within its grace) before it cancels the task."""
        entry = (task, goodbye, awaiter)
        self._tasks.append(entry)
        try:
            yield
        finally:
            self._tasks.remove(entry)
            self._changed.notify()

    def awaiter_of(self, task: object) -> object | None:
        """The activity that awaited ``task``; None if ``task`` is not on the stack."""
        return next((e[2] for e in self._tasks if e[0] is task), None)

    async def wait_left(self, task: object) -> None:
        """Wait until ``task`` has left the stack (its awaiter has dealt with its end); at
        once if it is not on it.

        Cancellation: a checkpoint; the stack is not affected.
        """
        await trio.lowlevel.checkpoint()
        while any(e[0] is task for e in self._tasks):
            await self._changed.wait()

    async def unwind(self, grace: float, tools: RunningTools, overrun: Callable[[], None]
                     ) -> None:
        """Close the tasks innermost first, each once its inner ones have returned: the task
        says its goodbye (its speeches stop, its ``on_exit`` runs and what it says plays),
        then it is cancelled (its awaiter gets a ``ToolError``).

        The goodbye gets ``grace`` seconds; the cancellation that follows gets its own
        ``grace`` for the task to return (at once, unless work shielded from cancellation
        holds it): a goodbye that used up its grace must not leave its task on the stack,
        which would cut the goodbyes of the agents below it. A task still on the stack after
        that whose tool still runs (among ``tools``) is held by work shielded from
        cancellation, which the close cannot end before anyway: ``overrun()`` reports it,
        and the unwinding waits for those tools, then gives the task its ``grace`` again to
        return, so that the agents below it still say their goodbyes. A task still on the
        stack after that (its activity still starting, say) ends the unwinding: the close's
        cancellation takes over.

        Cancellation: a checkpoint; the task being closed is cancelled, and the tasks
        already cancelled stay cancelled.
        """
        while self._tasks:
            entry = self._tasks[-1]
            task, goodbye, _ = entry
            try:
                with trio.move_on_after(grace):
                    await goodbye()
            finally:
                task.cancel()
            with trio.move_on_after(grace):
                await self.wait_left(task)
            if entry in self._tasks and tools.of_agent(task):
                overrun()
                await tools.wait_none_of(task)
                with trio.move_on_after(grace):
                    await self.wait_left(task)
            if entry in self._tasks:
                return
