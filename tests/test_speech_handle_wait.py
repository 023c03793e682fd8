"""SpeechHandle.wait_if_not_interrupted: LiveKit's way for a tool to wait for its own work
unless the speech is interrupted first (here the work is owned by the call: interrupted, it is
cancelled)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from agents_trio.speech_handle import SpeechHandle


async def test_returns_when_all_awaitables_finish_and_keeps_their_results(autojump_clock: trio.testing.MockClock) -> None:
    handle = SpeechHandle()
    results: list[str] = []

    async def work(name: str, seconds: float) -> str:
        await trio.sleep(seconds)
        results.append(name)
        return name

    await handle.wait_if_not_interrupted([work("a", 2), work("b", 1)])
    assert sorted(results) == ["a", "b"]
    assert not handle.interrupted


async def test_interruption_ends_the_wait_and_cancels_the_work(autojump_clock: trio.testing.MockClock) -> None:
    handle = SpeechHandle()
    finished: list[str] = []
    cancelled: list[str] = []

    async def work() -> None:
        try:
            await trio.sleep(10)
            finished.append("work")
        except trio.Cancelled:
            cancelled.append("work")
            raise

    async def interrupt_later() -> None:
        await trio.sleep(1)
        handle.interrupt()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_later)
        await handle.wait_if_not_interrupted([work()])
        assert trio.current_time() == pytest.approx(1)
    assert handle.interrupted
    assert finished == [] and cancelled == ["work"]


async def test_already_interrupted_returns_at_once_without_running_the_work(autojump_clock: trio.testing.MockClock) -> None:
    handle = SpeechHandle()
    handle.interrupt()
    ran: list[str] = []

    async def work() -> None:
        ran.append("work")

    await handle.wait_if_not_interrupted([work()])
    assert ran == []


async def test_a_failing_awaitable_does_not_raise_like_livekits_gather(autojump_clock: trio.testing.MockClock) -> None:
    handle = SpeechHandle()
    done: list[str] = []

    async def fails() -> None:
        raise ValueError("boom")

    async def ok() -> None:
        await trio.sleep(1)
        done.append("ok")

    await handle.wait_if_not_interrupted([fails(), ok()])
    assert done == ["ok"]


async def test_events_and_plain_awaitables_are_accepted(autojump_clock: trio.testing.MockClock) -> None:
    handle = SpeechHandle()
    event = trio.Event()

    async def set_later() -> None:
        await trio.sleep(3)
        event.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(set_later)
        await handle.wait_if_not_interrupted([event.wait()])
        assert trio.current_time() == pytest.approx(3)
