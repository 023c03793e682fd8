"""An asyncio event loop on virtual time, for running an asyncio runtime's sessions (the
Pipecat side) without waiting on the wall clock: ``loop.time()`` is a number that jumps to the
next timer whenever every task waits, as Trio's autojump clock does.

Work handed to a thread (``run_in_executor``: Pipecat's VAD runs there) stops the jump: while
any is in flight the loop waits for it for real, and virtual time stands still. Code that reads
``time.time()`` or ``time.monotonic()`` itself still sees the wall clock.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

WAIT_FOR_THREADS = 1.0       # real seconds per wait for a worker thread (then look again)


class _JumpingSelector(selectors.DefaultSelector):
    """Returns ready events at once; with none, moves the loop's virtual time to the next
    timer (the timeout the loop asks for) instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualTimeLoop | None = None

    def select(self, timeout: float | None = None) -> list[Any]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        loop = self.loop
        assert loop is not None
        if loop.threads_in_flight or timeout is None:
            # a worker thread will call back (or nothing is scheduled): wait for real
            return super().select(WAIT_FOR_THREADS)
        loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """``asyncio.SelectorEventLoop`` whose clock starts at 0 and jumps when idle."""

    def __init__(self) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.loop = self
        self._now = 0.0
        self.threads_in_flight = 0

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def run_in_executor(self, executor: Executor | None, func: Callable[..., Any],
                        *args: Any) -> asyncio.Future[Any]:
        fut = super().run_in_executor(executor, func, *args)
        self.threads_in_flight += 1
        fut.add_done_callback(self._thread_done)
        return fut

    def _thread_done(self, _fut: asyncio.Future[Any]) -> None:
        self.threads_in_flight -= 1


def run(main: Any) -> Any:
    """``asyncio.run(main)`` on a fresh ``VirtualTimeLoop``."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
