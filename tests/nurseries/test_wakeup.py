from __future__ import annotations

import trio
import trio.testing

from agents_trio.nurseries import Wakeup


async def test_notify_wakes_every_waiter_and_only_waiters(autojump_clock):
    wakeup = Wakeup()
    wakeup.notify()  # nobody waits: nothing to wake, nothing kept
    woken: list[tuple[str, float]] = []

    async def waiter(name: str) -> None:
        await wakeup.wait()
        woken.append((name, trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "a")
        nursery.start_soon(waiter, "b")
        await trio.sleep(1)
        assert woken == []
        wakeup.notify()
    assert sorted(woken) == [("a", 1), ("b", 1)]


async def test_a_cancelled_wait_leaves_the_others_waiting(autojump_clock):
    wakeup = Wakeup()
    woken: list[str] = []

    async def waiter(name: str) -> None:
        await wakeup.wait()
        woken.append(name)

    async with trio.open_nursery() as nursery:
        with trio.move_on_after(1):
            await wakeup.wait()
        nursery.start_soon(waiter, "b")
        await trio.testing.wait_all_tasks_blocked()
        wakeup.notify()
    assert woken == ["b"]
