from __future__ import annotations

import pytest
import trio

from agents_trio.nurseries import LatestSlot


async def test_replace_cancels_previous_and_runs_new(autojump_clock):
    log = []

    async def occupant(tag: str, duration: float):
        try:
            await trio.sleep(duration)
            log.append((tag, "done", trio.current_time()))
        finally:
            log.append((tag, "finally"))

    async with trio.open_nursery() as nursery:
        slot = LatestSlot(nursery)
        assert not slot.occupied
        slot.replace(occupant, "a", 100)
        assert slot.occupied
        await trio.sleep(1)
        slot.replace(occupant, "b", 2)
        await slot.wait_idle()
        assert not slot.occupied
        assert log == [("a", "finally"), ("b", "done", pytest.approx(3)), ("b", "finally")]


async def test_new_occupant_waits_for_previous_cleanup(autojump_clock):
    log = []

    async def old():
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(1)
            log.append(("old cleaned", trio.current_time()))

    async def new():
        log.append(("new started", trio.current_time()))

    async with trio.open_nursery() as nursery:
        slot = LatestSlot(nursery)
        slot.replace(old)
        await trio.testing.wait_all_tasks_blocked()
        slot.replace(new)
        assert slot.occupied
        await slot.wait_idle()
    assert log == [("old cleaned", pytest.approx(1)), ("new started", pytest.approx(1))]


async def test_intermediate_replacements_never_run(autojump_clock):
    started = []

    async def old():
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(1)

    async def record(tag):
        started.append(tag)
        await trio.sleep(1)

    async with trio.open_nursery() as nursery:
        slot = LatestSlot(nursery)
        slot.replace(old)
        await trio.testing.wait_all_tasks_blocked()
        slot.replace(record, "skipped")
        await trio.testing.wait_all_tasks_blocked()
        slot.replace(record, "latest")
        await slot.wait_idle()
    assert started == ["latest"]


async def test_cancel_and_new_occupant_independent(autojump_clock):
    finished = []

    async def occupant(tag):
        await trio.sleep(1)
        finished.append(tag)

    async with trio.open_nursery() as nursery:
        slot = LatestSlot(nursery)
        slot.replace(occupant, "a")
        slot.cancel()
        slot.cancel()
        slot.replace(occupant, "b")
        await slot.wait_idle()
        slot.cancel()  # no occupant: no effect on anything
        slot.replace(occupant, "c")
        await slot.wait_idle()
    assert finished == ["b", "c"]


async def test_wait_idle_returns_when_empty():
    async with trio.open_nursery() as nursery:
        slot = LatestSlot(nursery)
        with trio.fail_after(1):
            await slot.wait_idle()


async def test_waiter_cancelled_after_lock_handoff_never_runs():
    # ``old`` hands the lock to the parked "skipped" occupant while, in the same
    # scheduling batch (order varies), ``replacer`` cancels "skipped".
    for _ in range(20):
        started = []
        go = trio.Event()

        async def old():
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    await go.wait()

        async def record(tag):
            started.append(tag)

        async def replacer(slot):
            await go.wait()
            slot.replace(record, "latest")

        async with trio.open_nursery() as nursery:
            slot = LatestSlot(nursery)
            slot.replace(old)
            await trio.testing.wait_all_tasks_blocked()
            slot.replace(record, "skipped")
            nursery.start_soon(replacer, slot)
            await trio.testing.wait_all_tasks_blocked()
            go.set()
        assert started == ["latest"]
