"""The Trio benchmark side's ``Arrivals``: its waits end exactly when due, in due order, and a
cancelled wait is abandoned without waking anyone later."""

from __future__ import annotations

import trio
import trio.testing

from bench.trio_side import Arrivals


async def test_waits_end_when_due_in_order_including_an_earlier_one_added_later(
        autojump_clock: trio.testing.MockClock) -> None:
    arrivals = Arrivals()
    woke: list[tuple[str, float]] = []

    async def wait(name: str, due: float, delay: float = 0.0) -> None:
        await trio.sleep(delay)
        await arrivals.until(due)
        woke.append((name, trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(arrivals.run)
        async with trio.open_nursery() as waits:
            waits.start_soon(wait, "late", 5.0)
            waits.start_soon(wait, "early-added-after", 1.5, 1.0)   # re-arms the run task
            waits.start_soon(wait, "past", 0.5, 1.0)                # already due: returns now
            waits.start_soon(wait, "middle", 3.0)
        nursery.cancel_scope.cancel()

    assert woke == [("past", 1.0), ("early-added-after", 1.5), ("middle", 3.0), ("late", 5.0)]


async def test_a_cancelled_wait_is_abandoned(autojump_clock: trio.testing.MockClock) -> None:
    arrivals = Arrivals()
    woke: list[float] = []

    async def wait(due: float) -> None:
        await arrivals.until(due)
        woke.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(arrivals.run)
        with trio.move_on_after(1.0) as cancelled:
            await arrivals.until(2.0)
        assert cancelled.cancelled_caught
        assert trio.current_time() == 1.0
        await wait(3.0)                       # the abandoned entry (due 2.0) wakes nobody
        nursery.cancel_scope.cancel()
    assert woke == [3.0]
