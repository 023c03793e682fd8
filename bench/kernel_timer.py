"""A kernel timer the event loop watches as a readable file descriptor (Linux ``timerfd``).

The fakes' data (the network's audio frames, the LLM's tokens, the TTS's audio, the end of
playout) reaches a real client as I/O: a socket becomes readable and the loop's I/O wait
returns. Each side's ``Arrivals`` ends its waits through one of these, so a fake arrival
wakes the loop the way a real one does, on every runtime alike, instead of through the
runtime's timer machinery (on Trio a cancel scope with a deadline, ended by raising
``Cancelled``; on asyncio a ``TimerHandle``), which no real client pays for its data.

No runtime is imported here: the sides watch ``fd`` with their own loop (Trio's
``wait_readable``, asyncio's ``add_reader``).
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
from collections.abc import Callable

__all__ = ["GRANULARITY", "KernelTimer", "available", "rounded_up"]

# A loop's own timers wake through its I/O wait, whose timeout (epoll_wait) is the time left
# in whole milliseconds, rounded up: they end 0-1 ms late, and whatever falls due in that
# margin goes out in the same wake-up. The kernel timer is armed the same way
# (``rounded_up``), so an arrival is as late, and batched with the same others, as on the
# loops' timers.
GRANULARITY = 0.001

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = 0o4000
_TFD_CLOEXEC = 0o2000000


def rounded_up(seconds: float) -> float:
    """``seconds`` rounded up to whole milliseconds, as an epoll timeout is."""
    return math.ceil(seconds / GRANULARITY - 1e-9) * GRANULARITY


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc_calls() -> tuple[Callable[[], int], Callable[[int, float], None]] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        create, settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    create.argtypes = [ctypes.c_int, ctypes.c_int]
    create.restype = ctypes.c_int
    settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    settime.restype = ctypes.c_int

    def new() -> int:
        fd = int(create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        return fd

    def arm(fd: int, seconds: float) -> None:
        whole = int(seconds)
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(whole, int((seconds - whole) * 1e9)))
        if settime(fd, 0, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    return new, arm


def _os_calls() -> tuple[Callable[[], int], Callable[[int, float], None]] | None:
    create = getattr(os, "timerfd_create", None)   # Python 3.13+
    settime = getattr(os, "timerfd_settime", None)
    if create is None or settime is None:
        return None

    def new() -> int:
        return int(create(_CLOCK_MONOTONIC, flags=_TFD_NONBLOCK | _TFD_CLOEXEC))

    def arm(fd: int, seconds: float) -> None:
        settime(fd, initial=seconds)

    return new, arm


_CALLS = (_os_calls() or _libc_calls()) if sys.platform.startswith("linux") else None


def available() -> bool:
    """Whether this machine has kernel timers (Linux)."""
    return _CALLS is not None


class KernelTimer:
    """One one-shot kernel timer: ``arm(seconds)`` makes ``fd`` readable that many seconds
    from now (re-arming replaces the previous time), ``consume()`` after it fired."""

    def __init__(self) -> None:
        if _CALLS is None:
            raise OSError("no timerfd on this platform")
        self._new, self._arm = _CALLS
        self.fd = self._new()

    def arm(self, seconds: float) -> None:
        # a zero time would disarm the timer: the shortest wait is a nanosecond
        self._arm(self.fd, max(seconds, 1e-9))

    def consume(self) -> None:
        """Read the expiry count, so the descriptor is no longer readable."""
        try:
            os.read(self.fd, 8)
        except BlockingIOError:   # re-armed after it fired: not due yet
            pass

    def close(self) -> None:
        os.close(self.fd)
