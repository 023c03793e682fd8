"""A sleep that ends when it is due, not up to a millisecond later.

Trio's timers wake through the I/O manager's wait, and on Linux that wait (``epoll_wait``) takes
its timeout in whole milliseconds, rounded up: a ``trio.sleep`` ends 0-1 ms after its deadline
(half a millisecond on average), before the task runs. For most waits that does not matter. The
endpointing wait at the end of a user turn is on the reply's critical path, so it waits on a
Linux ``timerfd`` instead: a kernel timer with nanosecond resolution that the same I/O manager
watches as a readable file descriptor.

The timerfd is used only when the run's clock is Trio's own system clock (whose time is the
kernel's monotonic clock plus an offset). Under any other clock (``trio.testing.MockClock`` in
timeline tests, or an application's own) and where there is no ``timerfd`` (not Linux), the
sleep is ``trio.sleep``: virtual time stays virtual.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import sys
from typing import Protocol

import trio

__all__ = ["sleep_precisely"]

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = 0o4000
_TFD_CLOEXEC = 0o2000000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _TimerfdCalls(Protocol):
    """The two timerfd calls a sleep needs: make a monotonic timer, arm it once."""

    def create(self) -> int: ...

    def arm(self, fd: int, seconds: float) -> None: ...


class _LibcTimerfd:
    """timerfd through libc (Python before 3.13 has no ``os.timerfd_*``)."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._create = libc.timerfd_create
        self._settime = libc.timerfd_settime
        self._create.argtypes = [ctypes.c_int, ctypes.c_int]
        self._create.restype = ctypes.c_int
        self._settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec),
                                  ctypes.c_void_p]
        self._settime.restype = ctypes.c_int

    def create(self) -> int:
        fd = int(self._create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        return fd

    def arm(self, fd: int, seconds: float) -> None:
        whole = int(seconds)
        nanos = int((seconds - whole) * 1e9)
        if whole == 0 and nanos == 0:
            nanos = 1  # a zero it_value would disarm the timer
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(whole, nanos))
        if self._settime(fd, 0, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")


class _OsTimerfd:
    """timerfd through ``os`` (Python 3.13 and later)."""

    def create(self) -> int:
        return int(os.timerfd_create(  # type: ignore[attr-defined,unused-ignore]
            _CLOCK_MONOTONIC, flags=_TFD_NONBLOCK | _TFD_CLOEXEC))

    def arm(self, fd: int, seconds: float) -> None:
        os.timerfd_settime(fd, initial=max(seconds, 1e-9))  # type: ignore[attr-defined,unused-ignore]


def _find_timerfd() -> _TimerfdCalls | None:
    if not sys.platform.startswith("linux"):
        return None
    if hasattr(os, "timerfd_create") and hasattr(os, "timerfd_settime"):
        return _OsTimerfd()
    try:
        return _LibcTimerfd(ctypes.CDLL(None, use_errno=True))
    except (OSError, AttributeError):
        return None


_timerfd = _find_timerfd()

#: idle timers a run keeps for later sleeps; more than this many idle ones are closed
_MAX_IDLE = 64


class _TimerPool:
    """The timerfds of one Trio run that no sleep is using, re-armed by the next sleep.

    Arming a timer that has fired resets it (it is no longer readable), so a timer is
    reused as it is: a sleep costs one arming, not a creation, a first registration with the
    I/O manager and a close, and the close no longer comes between the wake-up and the
    sleeper's next step. The pool belongs to the run: a system task closes its timers when
    the run ends.
    """

    def __init__(self, calls: _TimerfdCalls) -> None:
        self.calls = calls
        self._idle: list[int] = []

    def take(self, seconds: float) -> int:
        """A timer armed to fire in ``seconds`` (an idle one, else a new one)."""
        fd = self._idle.pop() if self._idle else self.calls.create()
        try:
            self.calls.arm(fd, seconds)
        except BaseException:
            self._close(fd)
            raise
        return fd

    def give_back(self, fd: int) -> None:
        """``fd`` is not waited on any more; it may still be armed (a cancelled sleep's)."""
        if len(self._idle) < _MAX_IDLE:
            self._idle.append(fd)
        else:
            self._close(fd)

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for fd in idle:
            self._close(fd)

    @staticmethod
    def _close(fd: int) -> None:
        trio.lowlevel.notify_closing(fd)
        with contextlib.suppress(OSError):
            os.close(fd)


_pools: trio.lowlevel.RunVar[_TimerPool | None] = trio.lowlevel.RunVar(
    "agents_trio.precise_sleep.pool", default=None)


def _pool(calls: _TimerfdCalls) -> _TimerPool:
    """This run's pool (made by the first sleep, with the system task that closes it)."""
    pool = _pools.get()
    if pool is None or pool.calls is not calls:
        pool = _TimerPool(calls)
        _pools.set(pool)
        trio.lowlevel.spawn_system_task(_close_at_run_end, pool,
                                        name="agents_trio.precise_sleep.close_timers")
    return pool


async def _close_at_run_end(pool: _TimerPool) -> None:
    try:
        await trio.sleep_forever()
    finally:
        pool.close()


def _on_system_clock() -> bool:
    # Trio's default clock is not a public class: recognise it by name. Its time is
    # CLOCK_MONOTONIC plus an offset, so a monotonic timerfd armed for the remaining time is due
    # exactly at the deadline.
    clock = type(trio.lowlevel.current_clock())
    return clock.__name__ == "SystemClock" and clock.__module__.startswith("trio.")


async def sleep_precisely(seconds: float) -> None:
    """Sleep ``seconds`` of ``trio.current_time()``, waking when they have passed.

    On Trio's system clock on Linux, a kernel timer (timerfd) ends the wait, so the task is
    scheduled within the kernel's timer slack (about 50 µs) of the deadline instead of up to a
    millisecond after it. Otherwise it is ``trio.sleep(seconds)``. Never returns before the time
    has passed.

    Cancellation: a checkpoint; a cancelled sleep's timer goes back to the run's idle timers
    (the next sleep re-arms it).
    """
    calls = _timerfd
    if seconds <= 0 or not math.isfinite(seconds) or calls is None or not _on_system_clock():
        await trio.sleep(max(seconds, 0.0))
        return
    deadline = trio.current_time() + seconds
    pool = _pool(calls)
    try:
        fd = pool.take(seconds)
    except OSError:
        # no timerfd here after all (a sandbox refusing the call, no file descriptors left)
        await trio.sleep(seconds)
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        pool.give_back(fd)
    # the timer and the clock read the same kernel clock; this only guards against a clock
    # that is not what its name says
    remaining = deadline - trio.current_time()
    if remaining > 0:
        await trio.sleep(remaining)
