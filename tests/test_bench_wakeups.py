"""How the benchmark's fakes wake their loop, on every side alike.

The fakes' data (frames, tokens, audio, the end of playout) arrives through one ``Arrivals``
per process, which on the kernel's clock waits for a kernel timer to become readable, as a
client waits for its socket; inputs get their frames on phases set by the sessions' schedule,
not by each runtime's start-up. The waits here are a few milliseconds of the real clock: what
is tested is the kernel timer itself.
"""

from __future__ import annotations

import asyncio
import select

import pytest
import trio
import trio.testing

from bench import asyncio_arrivals, common, core, kernel_timer, trio_side, virtual_asyncio
from bench.core import FRAME

needs_kernel_timers = pytest.mark.skipif(not kernel_timer.available(),
                                         reason="kernel timers (timerfd) are Linux's")


def test_the_time_left_is_rounded_up_to_whole_milliseconds_as_an_epoll_timeout() -> None:
    assert kernel_timer.rounded_up(0.0003) == pytest.approx(0.001)
    assert kernel_timer.rounded_up(0.001) == pytest.approx(0.001)
    assert kernel_timer.rounded_up(0.0191) == pytest.approx(0.020)
    assert kernel_timer.rounded_up(0.0) == 0.0


@needs_kernel_timers
def test_a_kernel_timer_becomes_readable_when_due_and_not_before() -> None:
    timer = kernel_timer.KernelTimer()
    try:
        poller = select.poll()
        poller.register(timer.fd, select.POLLIN)
        timer.arm(0.030)
        assert poller.poll(0) == []
        timer.arm(0.005)                      # re-arming replaces the earlier time
        assert poller.poll(1000)              # readable within the second, not after 30 ms
        timer.consume()
        assert poller.poll(0) == []           # consumed: not readable until armed again
        timer.consume()                       # nothing to read is not an error
    finally:
        timer.close()


def test_the_frame_phase_comes_from_the_schedule_in_whole_microseconds() -> None:
    assert [core.frame_phase(0.04 * i) for i in range(8)] == [0.0] * 8
    assert core.frame_phase(4.0 * 7 / 300) == 0.013333       # 93.333 ms: 13.333 ms on
    assert core.frame_phase(0.03) == pytest.approx(0.01)
    assert all(0 <= core.frame_phase(4.0 * i / 500) < FRAME for i in range(500))


def test_time_zero_is_on_the_inputs_phase_of_the_networks_grid_whatever_the_first_read() -> None:
    network = common.Network(lambda: None, lambda _: None, lambda: 0.0)
    first = network.time_zero(10.0043, 0.0)           # the first input sets the grid
    assert first == 10.0043
    # later inputs scheduled on the grid's phase start on it, however late they first read
    assert network.time_zero(10.0443, 0.0) == pytest.approx(10.0443)
    assert network.time_zero(10.0451, 0.0) == pytest.approx(10.0643)
    assert network.time_zero(10.0431, 0.0) == pytest.approx(10.0443)
    # an input on another phase starts at that phase
    assert network.time_zero(10.0500, 0.010) == pytest.approx(10.0543)
    assert network.time_zero(10.0543, 0.010) == pytest.approx(10.0543)


async def _trio_waits(arrivals: trio_side.Arrivals, dues: list[float]
                      ) -> tuple[list[float], str]:
    """How late each wait ended, and what ended them."""
    late: list[float] = []
    order: list[float] = []
    timers: set[str] = set()

    async def wait(due: float) -> None:
        await arrivals.until(due)
        late.append(trio.current_time() - due)
        order.append(due)
        timers.add(type(arrivals._timer).__name__)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(arrivals.run)
        async with trio.open_nursery() as waits:
            for due in dues:
                waits.start_soon(wait, due)
        nursery.cancel_scope.cancel()
    assert order == sorted(dues)
    (timer,) = timers
    return late, timer


@needs_kernel_timers
async def test_on_the_system_clock_trio_arrivals_end_on_the_kernel_timer_never_early() -> None:
    arrivals = trio_side.Arrivals()
    t = trio.current_time()
    late, timer = await _trio_waits(arrivals, [t + 0.012, t + 0.004, t + 0.008])
    assert timer == "_FdTimer"
    assert all(0 <= x < 0.5 for x in late)


async def test_under_a_mock_clock_trio_arrivals_end_on_a_deadline_at_the_due_time(
        autojump_clock: trio.testing.MockClock) -> None:
    arrivals = trio_side.Arrivals()
    late, timer = await _trio_waits(arrivals, [3.0, 1.0, 2.0])
    assert timer == "_ScopeTimer"
    assert late == [0.0, 0.0, 0.0]


async def test_trio_callbacks_run_when_due_and_a_cancelled_one_never(
        autojump_clock: trio.testing.MockClock) -> None:
    arrivals = trio_side.Arrivals()
    called: list[tuple[str, float]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(arrivals.run)
        await trio.sleep(0)
        arrivals.at(2.0, lambda: called.append(("kept", trio.current_time())))
        dropped = arrivals.at(1.0, lambda: called.append(("dropped", trio.current_time())))
        arrivals.cancel(dropped)
        await trio.sleep(3.0)
        nursery.cancel_scope.cancel()
    assert called == [("kept", 2.0)]


async def _asyncio_waits(dues_from_now: list[float]) -> tuple[list[float], list[float], bool]:
    loop = asyncio.get_running_loop()
    arrivals = asyncio_arrivals.Arrivals()
    t = loop.time()
    late: list[float] = []
    order: list[float] = []
    called: list[float] = []

    async def wait(due: float) -> None:
        await arrivals.until(due)
        late.append(loop.time() - due)
        order.append(due)

    dues = [t + d for d in dues_from_now]
    arrivals.at(t + max(dues_from_now) / 2, lambda: called.append(loop.time()))
    arrivals.cancel(arrivals.at(t + min(dues_from_now) / 2, lambda: called.append(-1.0)))
    await asyncio.gather(*(wait(d) for d in dues))
    kernel = arrivals._timer is not None
    arrivals.close()
    assert order == sorted(dues)
    assert len(called) == 1 and called[0] >= t + max(dues_from_now) / 2
    return late, called, kernel


@needs_kernel_timers
def test_on_the_system_clock_asyncio_arrivals_end_on_the_kernel_timer_never_early() -> None:
    # a plain selector loop, as ``python -m bench.worker`` runs (other tests of the suite may
    # leave trio-asyncio's loop policy installed, whose loops keep Trio's time)
    loop = asyncio.SelectorEventLoop()
    try:
        late, _, kernel = loop.run_until_complete(_asyncio_waits([0.012, 0.004, 0.008]))
    finally:
        loop.close()
    assert kernel
    assert all(0 <= x < 0.5 for x in late)


def test_on_a_virtual_clock_asyncio_arrivals_use_the_loops_timer() -> None:
    late, _, kernel = virtual_asyncio.run(_asyncio_waits([3.0, 1.0, 2.0]))
    assert not kernel
    assert late == pytest.approx([0.0, 0.0, 0.0])
