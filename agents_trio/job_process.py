"""The process a job runs in (LiveKit's ``JobProcess``) and the job's shutdown callbacks.

A server's ``setup_fnc`` (LiveKit's prewarm) gets the :class:`JobProcess` once per process,
before any job; every job of that process then sees the same object as ``ctx.proc``, so
whatever the prewarm loads into ``proc.userdata`` (a VAD model, a client) is shared by the
process's jobs.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

__all__ = ["JobProcess", "ShutdownCallback", "ShutdownCallbacks"]

logger = logging.getLogger("agents_trio.job")

#: ``callback()`` or ``callback(reason)``, sync or async
ShutdownCallback = Callable[..., object]


class _ProcessLike(Protocol):
    """What LiveKit's own ``JobProcess`` offers (its worker's prewarm fills it)."""

    @property
    def userdata(self) -> dict[Any, Any]: ...

    @property
    def pid(self) -> int | None: ...


class JobProcess:
    """The process jobs run in: ``userdata`` filled by the prewarm, and the process id.

    Args:
        userdata: The dict to share (LiveKit's worker hands over its own process's dict, so
            what its ``setup_fnc`` stored is there); a new one by default.
        pid: The process id (default: this process).
        user_arguments: LiveKit's ``user_arguments`` (None unless a runner passes some).
        http_proxy: The proxy the process's plugins use, if any.
    """

    def __init__(self, *, userdata: dict[Any, Any] | None = None, pid: int | None = None,
                 user_arguments: object = None, http_proxy: str | None = None) -> None:
        self._userdata: dict[Any, Any] = {} if userdata is None else userdata
        self._pid = os.getpid() if pid is None else pid
        self._user_arguments = user_arguments
        self._http_proxy = http_proxy

    @classmethod
    def sharing(cls, process: _ProcessLike) -> JobProcess:
        """The same process as LiveKit's ``process`` (its ``userdata`` dict is shared)."""
        return cls(userdata=process.userdata, pid=process.pid)

    @property
    def userdata(self) -> dict[Any, Any]:
        return self._userdata

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def user_arguments(self) -> object:
        return self._user_arguments

    @property
    def http_proxy(self) -> str | None:
        return self._http_proxy

    def __repr__(self) -> str:
        return f"JobProcess(pid={self._pid}, userdata keys={sorted(map(str, self._userdata))})"


def _takes_reason(callback: ShutdownCallback) -> bool:
    """Whether ``callback`` accepts one positional argument (LiveKit passes the reason
    then)."""
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return bool(positional)


class ShutdownCallbacks:
    """The callbacks of ``ctx.add_shutdown_callback``, run once when the job ends.

    Added before the run, a callback waits for it; added while the callbacks run (by one of
    them), it joins them at once with the same reason and the grace left; added after the
    run, it is refused.
    """

    def __init__(self) -> None:
        # the callbacks waiting for the run; None once it began
        self._waiting: list[ShutdownCallback] | None = []
        # while the callbacks run: the nursery they run in, and the reason they got
        self._running: tuple[trio.Nursery, str] | None = None

    def add(self, callback: ShutdownCallback) -> None:
        """Raises:
            TypeError: ``callback`` is not callable.
            RuntimeError: The callbacks already ran (the job is over).
        """
        if not callable(callback):
            raise TypeError(f"a shutdown callback must be callable, got {callback!r}")
        if self._waiting is not None:
            self._waiting.append(callback)
        elif self._running is not None:
            nursery, reason = self._running
            nursery.start_soon(_call_logged, callback, reason)
        else:
            raise RuntimeError(f"the job's shutdown callbacks already ran: {callback!r} "
                               f"would never be called")

    async def run(self, reason: str, *, grace: float) -> None:
        """Call every callback at once (each with ``reason`` if it takes an argument) and
        wait for them, and for those they add, at most ``grace`` seconds; a failing callback
        is logged, the others go on. Runs once; later calls return at once.

        Cancellation: shielded: the callbacks get their ``grace`` even when the caller is
        cancelled (it sees the cancellation afterwards).
        """
        callbacks, self._waiting = self._waiting, None
        if callbacks is None:
            await trio.lowlevel.checkpoint()
            return
        try:
            with trio.move_on_after(grace, shield=True) as scope:
                # a nursery takes new tasks while a task of its own runs: one a callback adds
                async with trio.open_nursery() as nursery:
                    self._running = nursery, reason
                    for callback in callbacks:
                        nursery.start_soon(_call_logged, callback, reason)
        finally:
            self._running = None
        if scope.cancelled_caught:
            logger.warning("shutdown callbacks still running after %.0f s: cancelled", grace)


async def _call_logged(callback: ShutdownCallback, reason: str) -> None:
    try:
        result = callback(reason) if _takes_reason(callback) else callback()
        if inspect.isawaitable(result):
            await _await(result)
    except Exception:
        logger.exception("shutdown callback %r failed", callback)


async def _await(awaitable: Awaitable[object]) -> None:
    await awaitable
