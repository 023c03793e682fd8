"""The asyncio bridge: calls, cancellation both ways, channels with backpressure, batching.

These tests write asyncio code on purpose (it is what the bridge runs); only the package keeps
asyncio out of everything but ``agents_trio/io/bridge.py``.
"""

from __future__ import annotations

import asyncio
import gc

import pytest
import trio
import trio.lowlevel
import trio.testing

from agents_trio import open_bridge
from agents_trio.io.bridge import BridgeError, current_bridge, run_trio_in_thread


async def test_run_returns_the_result_on_trio_time(autojump_clock: trio.testing.MockClock
                                                    ) -> None:
    async with open_bridge() as bridge:
        t0 = trio.current_time()
        assert await bridge.run(asyncio.sleep, 10, result="done") == "done"
        assert trio.current_time() - t0 == pytest.approx(10.0)
        assert bridge.loop.time() == trio.current_time()


async def test_trio_cancel_cancels_the_asyncio_task_and_waits_for_its_cleanup(
        autojump_clock: trio.testing.MockClock) -> None:
    log: list[tuple[str, float]] = []

    async def work() -> None:
        loop = asyncio.get_running_loop()
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)  # cleanup that takes time
            log.append(("cleaned up", loop.time()))
            raise

    async with open_bridge() as bridge:
        t0 = trio.current_time()
        with trio.move_on_after(1) as scope:
            await bridge.run(work)
        assert scope.cancelled_caught
        assert log == [("cleaned up", pytest.approx(t0 + 1.5))]
        assert trio.current_time() - t0 == pytest.approx(1.5)
        assert bridge.statistics().asyncio_tasks == 0


async def test_swallowed_asyncio_cancellation_still_cancels_the_trio_caller(
        autojump_clock: trio.testing.MockClock) -> None:
    async def stubborn() -> str:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    async with open_bridge() as bridge:
        with trio.move_on_after(1) as scope:
            await bridge.run(stubborn)
            pytest.fail("the Trio caller must not see the swallowed result")
        assert scope.cancelled_caught


async def test_asyncio_errors_surface_as_trio_exceptions() -> None:
    async def fail() -> None:
        await asyncio.sleep(0)
        raise ValueError("provider said no")

    async with open_bridge() as bridge:
        with pytest.raises(ValueError, match="provider said no"):
            await bridge.run(fail)


async def test_an_error_raised_while_cancelled_is_not_lost(
        autojump_clock: trio.testing.MockClock) -> None:
    async def fail_on_cancel() -> None:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    async with open_bridge() as bridge:
        with pytest.raises(RuntimeError, match="cleanup failed"):
            with trio.move_on_after(1):
                await bridge.run(fail_on_cancel)


async def test_a_task_cancelled_from_the_asyncio_side_raises_bridge_error() -> None:
    async def cancel_self() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)

    async with open_bridge() as bridge:
        with pytest.raises(BridgeError, match="asyncio side"):
            await bridge.run(cancel_self)


async def test_a_task_ignoring_cancellation_is_abandoned_after_the_grace(
        autojump_clock: trio.testing.MockClock) -> None:
    async def ignores_first_cancel() -> None:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            pass
        await asyncio.sleep(100)  # the bridge's close cancels this one

    async with open_bridge(cancel_grace=2.0) as bridge:
        t0 = trio.current_time()
        with trio.move_on_after(1):
            await bridge.run(ignores_first_cancel)
        assert trio.current_time() - t0 == pytest.approx(3.0)
        stats = bridge.statistics()
        assert stats.abandoned_tasks == 1 and stats.asyncio_tasks == 1
    # leaving the bridge cancelled and awaited the abandoned task: no hang


async def test_run_sync_runs_inside_the_loop() -> None:
    seen = {}

    def probe() -> asyncio.Task[None]:
        seen["loop"] = asyncio.get_running_loop()
        return asyncio.ensure_future(asyncio.sleep(0))  # SDK constructors start tasks like this

    async with open_bridge() as bridge:
        task = await bridge.run_sync(probe)
        assert seen["loop"] is bridge.loop
        await bridge.run(lambda: task)
        assert bridge.statistics().asyncio_tasks == 0


async def test_call_soon_keeps_order_and_logs_errors() -> None:
    out: list[int] = []

    def boom() -> None:
        raise RuntimeError("boom")

    async with open_bridge() as bridge:
        bridge.call_soon(out.append, 1)
        bridge.call_soon(boom)
        bridge.call_soon(out.append, 2)
        await bridge.run_sync(lambda: None)
        assert out == [1, 2]
        assert bridge.statistics().callback_errors == 1


async def test_receive_channel_applies_backpressure(autojump_clock: trio.testing.MockClock
                                                    ) -> None:
    produced = 0

    async def numbers():
        nonlocal produced
        for i in range(50):
            produced += 1
            yield i

    async with open_bridge() as bridge:
        got = []
        async with bridge.open_receive_channel(numbers(), max_buffer_size=4) as chan:
            async for n in chan:
                # the producer is never more than the buffer (and the item in hand) ahead
                assert produced - len(got) <= 4 + 1
                got.append(n)
                await trio.sleep(0.1)
        assert got == list(range(50))


async def test_receive_batch_takes_a_burst_in_one_wakeup() -> None:
    async def burst():
        for i in range(100):
            yield i

    async with open_bridge() as bridge:
        batches = []
        async with bridge.open_receive_channel(burst(), max_buffer_size=1000) as chan:
            await trio.testing.wait_all_tasks_blocked()
            while True:
                try:
                    batches.append(await chan.receive_batch())
                except trio.EndOfChannel:
                    break
        assert [n for b in batches for n in b] == list(range(100))
        assert len(batches) == 1


async def test_receive_channel_maps_the_source_error() -> None:
    async def failing():
        yield 1
        raise ConnectionError("socket closed")

    class Mapped(Exception):
        pass

    async with open_bridge() as bridge, bridge.open_receive_channel(
            failing(), map_error=lambda e: Mapped(str(e))) as chan:
        assert await chan.receive() == 1
        with pytest.raises(Mapped, match="socket closed"):
            await chan.receive()


async def test_leaving_a_receive_channel_early_closes_the_source() -> None:
    closed = trio.Event()

    async def endless():
        try:
            i = 0
            while True:
                yield i
                i += 1
                await asyncio.sleep(0)
        finally:
            closed.set()

    async with open_bridge() as bridge:
        async with bridge.open_receive_channel(endless()) as chan:
            assert await chan.receive() == 0
        assert closed.is_set()
        assert bridge.statistics().asyncio_tasks == 0


async def test_callback_channel_delivers_emitter_events() -> None:
    from livekit import rtc

    async with open_bridge() as bridge:
        emitter = await bridge.run_sync(rtc.EventEmitter)
        callback, chan = bridge.callback_channel()
        emitter.on("participant_disconnected", callback)
        bridge.call_soon(emitter.emit, "participant_disconnected", "alice")
        bridge.call_soon(emitter.emit, "participant_disconnected", "bob")
        bridge.call_soon(chan.close_source)
        assert [p async for p in chan] == ["alice", "bob"]


async def test_send_channel_batches_and_applies_backpressure() -> None:
    consumed: list[list[int]] = []
    gate: asyncio.Event | None = None

    async def consumer(batch: list[int]) -> None:
        consumed.append(batch)
        if gate is not None:
            await gate.wait()

    async with open_bridge() as bridge:
        gate = await bridge.run_sync(asyncio.Event)
        async with bridge.open_send_channel(consumer, max_buffer_size=3) as chan:
            chan.send_nowait(0)
            await trio.testing.wait_all_tasks_blocked()  # the consumer holds [0] at the gate
            for i in (1, 2, 3):
                chan.send_nowait(i)
            with pytest.raises(trio.WouldBlock):
                chan.send_nowait(4)
            with trio.move_on_after(0.05) as blocked:
                await chan.send(4)
            assert blocked.cancelled_caught
            bridge.call_soon(gate.set)
            await chan.send(4)
            await chan.aclose()
        assert consumed[0] == [0] and [n for b in consumed for n in b] == [0, 1, 2, 3, 4]
        assert bridge.statistics().batches_to_asyncio == len(consumed) < 5


async def test_send_channel_clear_drops_items_not_yet_taken() -> None:
    consumed: list[int] = []
    gate: asyncio.Event | None = None

    async def consumer(batch: list[int]) -> None:
        consumed.extend(batch)
        await gate.wait()

    async with open_bridge() as bridge:
        gate = await bridge.run_sync(asyncio.Event)
        async with bridge.open_send_channel(consumer) as chan:
            chan.send_nowait(1)
            await trio.testing.wait_all_tasks_blocked()
            chan.send_nowait(2)
            chan.send_nowait(3)
            assert chan.clear() == [2, 3]
            bridge.call_soon(gate.set)
            await chan.wait_idle()
        assert consumed == [1]


async def test_send_channel_consumer_error_is_raised_by_the_next_send() -> None:
    async def consumer(batch: list[int]) -> None:
        raise OSError("device gone")

    async with open_bridge() as bridge, bridge.open_send_channel(consumer) as chan:
        await chan.send(1)
        await chan.wait_idle()
        with pytest.raises(OSError, match="device gone"):
            await chan.send(2)


async def test_feeder_carries_a_burst_in_one_callback_and_stops_on_error() -> None:
    got: list[int] = []

    def push(n: int) -> None:
        if n == 7:
            raise RuntimeError("stream closed")
        got.append(n)

    async with open_bridge() as bridge:
        feeder = bridge.feeder(push)
        before = bridge.statistics().callbacks
        for n in range(5):
            feeder.feed(n)
        await bridge.run_sync(lambda: None)
        assert got == [0, 1, 2, 3, 4]
        assert bridge.statistics().callbacks - before == 1
        for n in range(5, 10):
            feeder.feed(n)
        await bridge.run_sync(lambda: None)
        assert got == [0, 1, 2, 3, 4, 5, 6]
        assert isinstance(feeder.error, RuntimeError)


async def test_current_bridge_is_the_innermost_open_one() -> None:
    with pytest.raises(BridgeError, match="no asyncio bridge"):
        current_bridge()
    async with open_bridge() as outer:
        assert current_bridge() is outer
        async with open_bridge() as inner:
            assert current_bridge() is inner
        assert current_bridge() is outer
    with pytest.raises(BridgeError):
        current_bridge()


async def test_open_bridge_raises_the_body_error_unwrapped() -> None:
    with pytest.raises(KeyError):
        async with open_bridge():
            raise KeyError("x")


async def test_a_closed_bridge_refuses_calls() -> None:
    async with open_bridge() as bridge:
        pass
    with pytest.raises(BridgeError, match="closed"):
        await bridge.run(asyncio.sleep, 0)


def test_run_trio_in_thread_returns_and_is_cancelled_from_asyncio() -> None:
    cancelled = []

    async def trio_work(x: int) -> int:
        await trio.lowlevel.checkpoint()
        return x * 2

    async def trio_forever() -> None:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.append(True)

    async def main() -> None:
        assert await run_trio_in_thread(trio_work, 21) == 42
        task = asyncio.ensure_future(run_trio_in_thread(trio_forever))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    loop = asyncio.SelectorEventLoop()  # a plain asyncio loop, like LiveKit's job process
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert cancelled == [True]


async def _swallows_every_cancellation(log: list[str]) -> None:
    """asyncio work that refuses to stop: it catches each ``CancelledError`` and awaits again.

    It gives up after 50 rounds so that, without a bounded exit, the test fails on its timing
    assertions instead of spinning forever on the virtual clock.
    """
    log.append("started")
    for _ in range(50):
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            log.append("swallowed")


async def test_leaving_the_bridge_is_bounded_when_a_task_swallows_its_cancellation(
        autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 15 item 12: leaving hung forever, even under ``trio.fail_after``."""
    log: list[str] = []
    grace = 2.0
    margin = 0.5
    caplog.set_level("WARNING", logger="agents_trio.bridge")
    with trio.fail_after(grace + margin):
        async with open_bridge(cancel_grace=grace) as bridge:
            bridge.call_soon(lambda: asyncio.ensure_future(_swallows_every_cancellation(log)))
            await trio.testing.wait_all_tasks_blocked()
            assert log == ["started"]
            t_exit = trio.current_time()
    assert trio.current_time() - t_exit == pytest.approx(grace)
    assert log == ["started", "swallowed"]
    stats = bridge.statistics()
    assert stats.abandoned_tasks == 1 and stats.loop_errors == 0
    abandoned = [r for r in caplog.records if "abandon" in r.getMessage()]
    assert len(abandoned) == 1 and "_swallows_every_cancellation" in abandoned[0].getMessage()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_leaving_the_bridge_under_a_deadline_abandons_a_stubborn_call(
        autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture) -> None:
    """The body is cancelled by the caller's deadline while a ``run`` waits on stubborn work:
    the call abandons it after the grace, then leaving the bridge cancels it again and waits
    one more grace."""
    log: list[str] = []
    grace = 2.0
    caplog.set_level("WARNING", logger="agents_trio.bridge")
    t0 = trio.current_time()
    with trio.move_on_after(1) as deadline:
        async with open_bridge(cancel_grace=grace) as bridge:
            await bridge.run(_swallows_every_cancellation, log)
    assert deadline.cancelled_caught
    assert trio.current_time() - t0 == pytest.approx(1 + 2 * grace)
    assert log == ["started", "swallowed", "swallowed"]
    assert bridge.statistics().abandoned_tasks == 1
    abandoned = [r.getMessage() for r in caplog.records if "abandon" in r.getMessage()]
    assert len(abandoned) == 2 and all("_swallows_every_cancellation" in m for m in abandoned)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_leaving_the_bridge_abandons_work_that_refuses_even_to_close(
        caplog: pytest.LogCaptureFixture) -> None:
    """Work that catches every exception, ``GeneratorExit`` included, and awaits again (also
    in an async generator's ``finally``, which the loop's shutdown finalizes).

    A run of its own, so that Python's report of those coroutines when they are collected
    (they ignored ``GeneratorExit``) is made here and not in a later test.
    """
    log: list[str] = []

    async def refuses_everything() -> None:
        for _ in range(20):  # bounded, so that a failing bridge ends the test on its clock
            try:
                await asyncio.sleep(100)
            except BaseException as e:  # noqa: BLE001 -- the misbehaviour under test
                log.append(type(e).__name__)

    async def numbers():
        try:
            yield 1
        finally:
            await refuses_everything()

    async def holds_a_generator() -> None:
        async for _ in numbers():
            await refuses_everything()

    async def main() -> float:
        with trio.fail_after(3):
            async with open_bridge(cancel_grace=2.0) as bridge:
                bridge.call_soon(lambda: asyncio.ensure_future(refuses_everything()))
                bridge.call_soon(lambda: asyncio.ensure_future(holds_a_generator()))
                await trio.testing.wait_all_tasks_blocked()
                t_exit = trio.current_time()
        return trio.current_time() - t_exit

    caplog.set_level("WARNING", logger="agents_trio.bridge")
    elapsed = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert elapsed == pytest.approx(2.0)
    assert "GeneratorExit" in log
    named = " ".join(r.getMessage() for r in caplog.records)
    assert "refuses_everything" in named and "holds_a_generator" in named
    caplog.clear()
    gc.collect()
