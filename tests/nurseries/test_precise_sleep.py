from __future__ import annotations

import math
import os
import sys

import pytest
import trio
import trio.testing

from agents_trio.nurseries import precise_sleep, sleep_precisely

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="timerfd is Linux's")


def _open_fds() -> int:
    """The process's open timerfds (other threads of the test process, such as a bridge left
    by an earlier test, may open and close other descriptors meanwhile)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since it was listed (the listing's own descriptor too)
            continue
        count += target == "anon_inode:[timerfd]"
    return count


class _CountingArm:
    def __init__(self, arm):
        self.arm = arm
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> int:
        self.calls.append(seconds)
        return self.arm(seconds)


@pytest.fixture
def counting_arm(monkeypatch):
    if precise_sleep._arm_timerfd is None:
        pytest.skip("no timerfd on this platform")
    counting = _CountingArm(precise_sleep._arm_timerfd)
    monkeypatch.setattr(precise_sleep, "_arm_timerfd", counting)
    return counting


def test_virtual_time_stays_virtual(counting_arm):
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main():
        start = trio.current_time()
        await sleep_precisely(0.5)
        return trio.current_time() - start

    assert trio.run(main, clock=clock) == pytest.approx(0.5)
    assert counting_arm.calls == []  # the kernel's clock is not the run's


@linux_only
def test_on_the_system_clock_a_kernel_timer_ends_the_wait_and_never_early(counting_arm):
    async def main():
        fds = _open_fds()
        lateness = []
        for seconds in (0.002, 0.0035, 0.0001):
            deadline = trio.current_time() + seconds
            await sleep_precisely(seconds)
            lateness.append(trio.current_time() - deadline)
        return fds, _open_fds(), lateness

    fds_before, fds_after, lateness = trio.run(main)
    assert len(counting_arm.calls) == 3
    assert all(late >= 0 for late in lateness)
    assert fds_after == fds_before  # each timer closed


@linux_only
def test_cancelling_the_sleep_closes_its_timer(counting_arm):
    async def main():
        fds = _open_fds()
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sleep_precisely, 3600.0)
                await trio.testing.wait_all_tasks_blocked()
                during = _open_fds()
                scope.cancel()
        return fds, during, _open_fds()

    before, during, after = trio.run(main)
    assert counting_arm.calls == [3600.0]
    assert during == before + 1
    assert after == before


async def _lateness_of_a_short_sleep() -> float:
    """How late a 1 ms ``sleep_precisely`` returned (never negative: never early)."""
    deadline = trio.current_time() + 0.001
    await sleep_precisely(0.001)
    return trio.current_time() - deadline


def test_without_a_timerfd_it_is_trio_sleep(monkeypatch):
    monkeypatch.setattr(precise_sleep, "_arm_timerfd", None)

    assert trio.run(_lateness_of_a_short_sleep) >= 0


def test_forever_is_trio_sleep(counting_arm):
    async def main():
        with trio.move_on_after(0.01) as scope:
            await sleep_precisely(math.inf)
        return scope.cancelled_caught

    assert trio.run(main) is True
    assert counting_arm.calls == []


def test_nothing_to_wait_is_a_checkpoint(counting_arm):
    async def main():
        with trio.CancelScope() as scope:
            scope.cancel()
            await sleep_precisely(0)
        return scope.cancelled_caught

    assert trio.run(main) is True
    assert counting_arm.calls == []


def test_a_timerfd_refused_falls_back_to_trio_sleep(monkeypatch):
    def refused(seconds: float) -> int:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(precise_sleep, "_arm_timerfd", refused)

    assert trio.run(_lateness_of_a_short_sleep) >= 0
