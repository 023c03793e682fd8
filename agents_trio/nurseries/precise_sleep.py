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

import ctypes
import math
import os
import sys
from collections.abc import Callable

import trio

__all__ = ["sleep_precisely"]

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = 0o4000
_TFD_CLOEXEC = 0o2000000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc_timerfd() -> Callable[[float], int] | None:
    """Arm a one-shot monotonic timerfd through libc (Python before 3.13 has no os.timerfd_*)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create = libc.timerfd_create
        settime = libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = [ctypes.c_int, ctypes.c_int]
    create.restype = ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int

    def arm(seconds: float) -> int:
        fd = int(create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        whole = int(seconds)
        nanos = int((seconds - whole) * 1e9)
        if whole == 0 and nanos == 0:
            nanos = 1  # a zero it_value would disarm the timer
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(whole, nanos))
        if settime(fd, 0, ctypes.byref(spec), None) != 0:
            err = ctypes.get_errno()
            os.close(fd)
            raise OSError(err, "timerfd_settime failed")
        return fd

    return arm


def _os_timerfd() -> Callable[[float], int] | None:
    create = getattr(os, "timerfd_create", None)
    settime = getattr(os, "timerfd_settime", None)
    if create is None or settime is None:
        return None

    def arm(seconds: float) -> int:
        fd = int(create(_CLOCK_MONOTONIC, flags=_TFD_NONBLOCK | _TFD_CLOEXEC))
        try:
            settime(fd, initial=max(seconds, 1e-9))
        except BaseException:
            os.close(fd)
            raise
        return fd

    return arm


def _find_timerfd() -> Callable[[float], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    return _os_timerfd() or _libc_timerfd()


_arm_timerfd = _find_timerfd()


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

    Cancellation: a checkpoint; cancelling the sleep closes its timer.
    """
    arm = _arm_timerfd
    if seconds <= 0 or not math.isfinite(seconds) or arm is None or not _on_system_clock():
        await trio.sleep(max(seconds, 0.0))
        return
    deadline = trio.current_time() + seconds
    try:
        fd = arm(seconds)
    except OSError:
        # no timerfd here after all (a sandbox refusing the call, no file descriptors left)
        await trio.sleep(seconds)
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
    # the timer and the clock read the same kernel clock; this only guards against a clock
    # that is not what its name says
    remaining = deadline - trio.current_time()
    if remaining > 0:
        await trio.sleep(remaining)
