from __future__ import annotations

import math
import os
import select
import sys

import pytest
import trio
import trio.testing

from agents_trio.nurseries import precise_sleep, sleep_precisely

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="timerfd is Linux's")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class _Counting:
    """The timerfd calls, counted."""

    def __init__(self, calls):
        self.calls = calls
        self.created = 0
        self.armed: list[float] = []

    def create(self) -> int:
        self.created += 1
        return self.calls.create()

    def arm(self, fd: int, seconds: float) -> None:
        self.armed.append(seconds)
        self.calls.arm(fd, seconds)


@pytest.fixture
def counting(monkeypatch):
    if precise_sleep._timerfd is None:
        pytest.skip("no timerfd on this platform")
    counted = _Counting(precise_sleep._timerfd)
    monkeypatch.setattr(precise_sleep, "_timerfd", counted)
    return counted


def test_virtual_time_stays_virtual(counting):
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main():
        start = trio.current_time()
        await sleep_precisely(0.5)
        return trio.current_time() - start

    assert trio.run(main, clock=clock) == pytest.approx(0.5)
    assert counting.armed == []  # the kernel's clock is not the run's


@linux_only
def test_on_the_system_clock_a_kernel_timer_ends_the_wait_and_never_early(counting):
    async def main():
        lateness = []
        for seconds in (0.002, 0.0035, 0.0001):
            deadline = trio.current_time() + seconds
            await sleep_precisely(seconds)
            lateness.append(trio.current_time() - deadline)
        return lateness

    lateness = trio.run(main)
    assert counting.armed == [0.002, 0.0035, 0.0001]
    assert all(late >= 0 for late in lateness)


@linux_only
def test_one_timer_serves_the_sleeps_one_after_another_and_the_run_closes_it(counting):
    async def main():
        at_start = _open_fds()
        for _ in range(3):
            await sleep_precisely(0.001)
        return at_start, _open_fds()

    before = _open_fds()
    at_start, during = trio.run(main)
    assert counting.created == 1 and len(counting.armed) == 3
    assert during == at_start + 1   # the idle timer, kept for the next sleep
    assert _open_fds() == before    # closed with the run


@linux_only
def test_arming_a_timer_that_fired_makes_it_wait_again(counting):
    async def main():
        pool = precise_sleep._TimerPool(counting)
        fd = pool.take(0.0001)
        await trio.lowlevel.wait_readable(fd)   # fired
        pool.give_back(fd)
        again = pool.take(3600.0)
        readable = select.select([again], [], [], 0)[0]
        pool.close()
        return fd, again, readable

    fd, again, readable = trio.run(main)
    assert again == fd            # the idle timer, re-armed
    assert readable == []         # not readable until the new time has passed


@linux_only
def test_concurrent_sleeps_each_have_a_timer_and_give_it_back(counting):
    async def main():
        ends = {}

        async def sleeper(seconds: float) -> None:
            await sleep_precisely(seconds)
            ends[seconds] = trio.current_time()

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for seconds in (0.004, 0.001, 0.002):
                nursery.start_soon(sleeper, seconds)
        await sleep_precisely(0.001)   # an idle one is re-armed
        return {s: t - start for s, t in ends.items()}

    before = _open_fds()
    took = trio.run(main)
    assert counting.created == 3 and len(counting.armed) == 4
    assert all(took[s] >= s for s in took)
    assert _open_fds() == before


@linux_only
def test_a_cancelled_sleeps_timer_is_reused_and_waits_its_own_time(counting):
    async def main():
        with trio.move_on_after(0.001):
            await sleep_precisely(3600.0)   # cancelled, its timer still armed for an hour
        deadline = trio.current_time() + 0.002
        await sleep_precisely(0.002)        # the same timer, re-armed
        return trio.current_time() - deadline

    before = _open_fds()
    late = trio.run(main)
    assert counting.created == 1 and counting.armed == [3600.0, 0.002]
    assert 0 <= late < 1.0   # neither early nor held to the cancelled sleep's hour
    assert _open_fds() == before


@linux_only
def test_idle_timers_beyond_the_cap_are_closed(counting, monkeypatch):
    monkeypatch.setattr(precise_sleep, "_MAX_IDLE", 2)

    async def main():
        at_start = _open_fds()
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(sleep_precisely, 0.001)
        return at_start, _open_fds()

    before = _open_fds()
    at_start, during = trio.run(main)
    assert counting.created == 4
    assert during == at_start + 2
    assert _open_fds() == before


async def _lateness_of_a_short_sleep() -> float:
    """How late a 1 ms ``sleep_precisely`` returned (never negative: never early)."""
    deadline = trio.current_time() + 0.001
    await sleep_precisely(0.001)
    return trio.current_time() - deadline


def test_without_a_timerfd_it_is_trio_sleep(monkeypatch):
    monkeypatch.setattr(precise_sleep, "_timerfd", None)

    assert trio.run(_lateness_of_a_short_sleep) >= 0


def test_forever_is_trio_sleep(counting):
    async def main():
        with trio.move_on_after(0.01) as scope:
            await sleep_precisely(math.inf)
        return scope.cancelled_caught

    assert trio.run(main) is True
    assert counting.armed == []


def test_nothing_to_wait_is_a_checkpoint(counting):
    async def main():
        with trio.CancelScope() as scope:
            scope.cancel()
            await sleep_precisely(0)
        return scope.cancelled_caught

    assert trio.run(main) is True
    assert counting.armed == []


def test_a_timerfd_refused_falls_back_to_trio_sleep(monkeypatch):
    class Refused:
        def create(self) -> int:
            raise OSError(1, "Operation not permitted")

        def arm(self, fd: int, seconds: float) -> None:
            raise AssertionError("never armed")

    monkeypatch.setattr(precise_sleep, "_timerfd", Refused())

    assert trio.run(_lateness_of_a_short_sleep) >= 0


@linux_only
def test_a_timer_that_cannot_be_armed_is_closed_and_the_sleep_falls_back(monkeypatch):
    real = precise_sleep._timerfd
    if real is None:
        pytest.skip("no timerfd on this platform")

    class Unarmable:
        def create(self) -> int:
            return real.create()

        def arm(self, fd: int, seconds: float) -> None:
            raise OSError(22, "Invalid argument")

    monkeypatch.setattr(precise_sleep, "_timerfd", Unarmable())
    before = _open_fds()
    assert trio.run(_lateness_of_a_short_sleep) >= 0
    assert _open_fds() == before
