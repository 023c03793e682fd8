"""What a job's server calls return (``ctx.delete_room()``, ``ctx.add_sip_participant()``,
``ctx.transfer_sip_participant()``): LiveKit returns an asyncio future of a task it tracks;
here the job runs the request in its own nursery (it waits for it before it ends) and hands
back a :class:`ServerRequest`, which may be awaited for the answer or ignored. Asked for once
the job's run is over (in a shutdown callback, as LiveKit's examples do), the request runs
when it is awaited.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

import trio

__all__ = ["ServerRequest", "ServerRequestCancelled"]

T = TypeVar("T")


class ServerRequestCancelled(RuntimeError):
    """The request was cancelled before it was answered (the job ended first)."""


class ServerRequest(Generic[T]):
    """One server call made for a job: ``await request`` gives its answer (or raises its
    error); ``done()`` says whether it has one.

    Attributes:
        name: What was asked (``"delete_room"``, …).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._done = trio.Event()
        self._result: T | None = None
        self._error: BaseException | None = None
        self._deferred: Callable[[], Awaitable[None]] | None = None

    def run_when_awaited(self, run: Callable[[], Awaitable[None]]) -> None:
        """Leave the call to whoever awaits the request (a job's shutdown callbacks, after
        the job's own nursery is gone): ``run`` settles it in the awaiting task."""
        self._deferred = run

    def done(self) -> bool:
        return self._done.is_set()

    def set_result(self, result: T) -> None:
        """The answer (first call wins)."""
        if not self._done.is_set():
            self._result = result
            self._done.set()

    def set_error(self, error: BaseException) -> None:
        """The failure (first call wins)."""
        if not self._done.is_set():
            self._error = error
            self._done.set()

    async def wait(self) -> T:
        """The answer, once there is one.

        Raises:
            Exception: The request's error (livekit-api's ``TwirpError``, a connection
                error, :class:`ServerRequestCancelled`).

        Cancellation: cancelling the wait leaves the request running (one run by its
        awaiter, see :meth:`run_when_awaited`, is cancelled).
        """
        run, self._deferred = self._deferred, None
        if run is not None:
            await run()
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]

    def __await__(self) -> Generator[Any, None, T]:
        return self.wait().__await__()

    def __repr__(self) -> str:
        state = "pending" if not self.done() else ("failed" if self._error else "done")
        return f"ServerRequest({self.name!r}, {state})"
