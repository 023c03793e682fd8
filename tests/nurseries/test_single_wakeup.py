from __future__ import annotations

import pytest
import trio
import trio.testing

from agents_trio.nurseries import SingleWakeup


async def test_notify_wakes_the_waiting_task_and_is_not_remembered(autojump_clock):
    wakeup = SingleWakeup()
    wakeup.notify()  # nobody waits: nothing to wake, nothing kept
    woken: list[float] = []

    async def waiter() -> None:
        await wakeup.wait()
        woken.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(1)
        assert woken == []
        wakeup.notify()
        wakeup.notify()   # a second notify finds nobody waiting
    assert woken == [1]


async def test_a_second_waiter_is_refused_while_one_waits(autojump_clock):
    wakeup = SingleWakeup()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(wakeup.wait)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.BusyResourceError):
            await wakeup.wait()
        wakeup.notify()


async def test_a_cancelled_wait_frees_the_place_for_the_next_one(autojump_clock):
    wakeup = SingleWakeup()
    woken: list[str] = []

    async def waiter() -> None:
        await wakeup.wait()
        woken.append("b")

    with trio.move_on_after(1) as scope:
        await wakeup.wait()
    assert scope.cancelled_caught
    wakeup.notify()   # the cancelled waiter is not woken (it is gone)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        wakeup.notify()
    assert woken == ["b"]
