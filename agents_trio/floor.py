"""The floor: tool code that must not race the agent's own speech (``RunContext.foreground``).

A holder got the agent idle and keeps it to itself until it lets go: while anyone holds the
floor, every other wait for it (another ``foreground()``, a deferred tool reply, a filler)
waits for the release. Code inside a hold (and the tasks it starts) passes: nested holds and
the speeches the holder asks for are its own.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from .nurseries import Flag

__all__ = ["Floor"]

_holding: contextvars.ContextVar[bool] = contextvars.ContextVar("agents_trio_floor_held",
                                                               default=False)


class Floor:
    """Who holds the floor of one session. ``on_release`` is called when the last holder
    lets go (waiters on the conversation look again)."""

    def __init__(self, on_release: Callable[[], None] = lambda: None) -> None:
        self._holds = 0
        self._released = Flag()
        self._released.set()
        self._on_release = on_release

    @property
    def held_by_other(self) -> bool:
        """Someone else holds the floor (code inside a hold does not count as other)."""
        return self._holds > 0 and not _holding.get()

    async def wait_released(self) -> None:
        """Wait until no one holds the floor.

        Cancellation: a checkpoint only.
        """
        await self._released.wait()

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Hold the floor for the body (the caller has waited for the agent to be idle).

        Cancellation: the floor is released.
        """
        token = _holding.set(True)
        self._holds += 1
        if self._holds == 1:
            self._released = Flag()
        try:
            yield
        finally:
            _holding.reset(token)
            self._holds -= 1
            if self._holds == 0:
                self._released.set()
                self._on_release()
