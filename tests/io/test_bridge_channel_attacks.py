"""Attacks on the bridge's channels: consumers and pumps leaving at awkward moments.

asyncio code on purpose (see ``test_bridge.py``).
"""

from __future__ import annotations

import asyncio

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import open_bridge
from agents_trio.io.bridge import BridgeError, run_trio_in_thread


async def _ticking(n: int, period: float = 1.0):
    for i in range(n):
        await asyncio.sleep(period)
        yield i


async def test_two_receivers_sharing_a_receive_channel_see_no_false_end(
        autojump_clock: trio.testing.MockClock) -> None:
    """Each item is woken for by both receivers; the one that loses the race must wait again,
    not raise ``WouldBlock`` (``receive``) or a false ``EndOfChannel`` (``receive_batch``)."""
    got: list[int] = []
    ends: list[str] = []

    async def by_one(chan) -> None:
        try:
            while True:
                got.append(await chan.receive())
        except trio.EndOfChannel:
            ends.append("one")

    async def by_batch(chan) -> None:
        try:
            while True:
                got.extend(await chan.receive_batch())
        except trio.EndOfChannel:
            ends.append("batch")

    async with open_bridge() as bridge:
        async with bridge.open_receive_channel(_ticking(10)) as chan:
            t0 = trio.current_time()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(by_one, chan)
                nursery.start_soon(by_batch, chan)
            assert trio.current_time() - t0 == pytest.approx(10.0)
    assert sorted(got) == list(range(10)) and len(got) == 10
    assert sorted(ends) == ["batch", "one"]


async def test_a_receiver_in_another_task_is_released_when_the_block_is_left(
        autojump_clock: trio.testing.MockClock) -> None:
    """Leaving the block closes the channel: a receive waiting in a task outside the block
    raises ``trio.ClosedResourceError`` (as a closed Trio channel's would) instead of waiting
    for an item that will never come."""
    outcomes: list[str] = []

    async def reader(chan) -> None:
        try:
            await chan.receive()
        except trio.ClosedResourceError:
            outcomes.append("closed")

    async with open_bridge() as bridge:
        with trio.fail_after(100):
            async with trio.open_nursery() as nursery:
                async with bridge.open_receive_channel(_ticking(1, period=1000)) as chan:
                    nursery.start_soon(reader, chan)
                    await trio.sleep(1)
        assert bridge.statistics().asyncio_tasks == 0
    assert outcomes == ["closed"]


async def test_a_shielded_receive_is_released_when_the_pump_is_cancelled(
        autojump_clock: trio.testing.MockClock) -> None:
    """The block's scope is cancelled while the body receives under a shield: the pump stops
    (it is cancelled with the scope), so the receive must end with an error, not hang."""
    async with open_bridge() as bridge:
        with trio.CancelScope() as outer:
            async with bridge.open_receive_channel(_ticking(1, period=1000)) as chan:
                outer.cancel()
                with trio.CancelScope(shield=True), trio.fail_after(100):
                    with pytest.raises(BridgeError, match="cancelled"):
                        await chan.receive()
        assert bridge.statistics().asyncio_tasks == 0


async def test_a_send_channel_left_before_its_pump_ran_is_finished(
        autojump_clock: trio.testing.MockClock) -> None:
    """The block is entered in a cancelled scope: its pump never starts. The channel must
    still end (``finished``), and a shielded ``aclose`` must report the undelivered items,
    not wait forever for a pump that will never take them."""
    consumed: list[int] = []

    async def consumer(batch: list[int]) -> None:
        consumed.extend(batch)

    async with open_bridge() as bridge:
        with trio.CancelScope() as outer:
            outer.cancel()
            async with bridge.open_send_channel(consumer) as chan:
                chan.send_nowait(1)
                with trio.CancelScope(shield=True), trio.fail_after(100):
                    with pytest.raises(BridgeError, match="cancelled"):
                        await chan.aclose()
                assert chan.finished
        assert bridge.statistics().asyncio_tasks == 0
    assert consumed == []


async def test_aclose_waiting_outside_the_block_does_not_report_a_clean_close(
        autojump_clock: trio.testing.MockClock) -> None:
    """A task outside the block waits in ``aclose`` while the block is left with items still
    buffered: the pump is cancelled, so ``aclose`` must raise, not return as if every item
    had been consumed."""
    consumed: list[int] = []
    outcomes: list[str] = []

    async def slow_consumer(batch: list[int]) -> None:
        await asyncio.sleep(10)
        consumed.extend(batch)

    async def closer(chan) -> None:
        try:
            await chan.aclose()
        except BridgeError:
            outcomes.append("not drained")
        else:
            outcomes.append("drained")

    async with open_bridge() as bridge:
        async with trio.open_nursery() as nursery:
            async with bridge.open_send_channel(slow_consumer) as chan:
                for i in range(3):
                    chan.send_nowait(i)
                nursery.start_soon(closer, chan)
                await trio.sleep(1)
    assert consumed == [] and outcomes == ["not drained"]


async def test_the_bridge_closing_under_an_open_receive_channel_reports_it_once(
        autojump_clock: trio.testing.MockClock) -> None:
    """``bridge.aclose()`` cancels the pump from the asyncio side while the body waits in
    ``receive``: the receive raises ``BridgeError``, once, and the block does not raise it a
    second time (an ``ExceptionGroup`` of the same error twice)."""
    async with open_bridge() as bridge:
        # (pytest.raises matches no group: a BridgeError raised twice would fail here)
        with pytest.raises(BridgeError):
            async with bridge.open_receive_channel(_ticking(1, period=1000)) as chan:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(bridge.aclose)
                    await chan.receive()


@pytest.mark.parametrize("opener", ["receive", "send"])
async def test_a_buffer_of_zero_is_refused(opener: str) -> None:
    async def consumer(batch: list[int]) -> None:
        pass

    async with open_bridge() as bridge:
        with pytest.raises(ValueError, match="max_buffer_size"):
            if opener == "receive":
                async with bridge.open_receive_channel(_ticking(1), max_buffer_size=0):
                    pass
            else:
                async with bridge.open_send_channel(consumer, max_buffer_size=0):
                    pass


async def test_a_batch_of_no_items_is_refused_at_the_call(
        autojump_clock: trio.testing.MockClock) -> None:
    async with open_bridge() as bridge:
        async with bridge.open_receive_channel(_ticking(2)) as chan:
            with pytest.raises(ValueError, match="max_items"):
                await chan.receive_batch(max_items=0)
            # nothing was taken by the refused call
            assert await chan.receive_batch(max_items=1) == [0]


# -- property attacks: the Trio side leaving at every moment of the pump ----------------------
class _SourceFailed(Exception):
    pass


class _Mapped(Exception):
    pass


@settings(deadline=None, max_examples=200)
@given(items=st.integers(0, 6), gaps=st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=7,
                                              max_size=7),
       end=st.sampled_from(["end", "raise", "hang"]), stubborn=st.booleans(),
       max_buffer=st.integers(1, 3), batches=st.booleans(),
       read_gap=st.sampled_from([0.0, 0.25, 2.0]),
       cancel_at=st.sampled_from([None, 0.0, 0.5, 1.0, 1.5, 2.5, 4.0, 7.0]))
def test_a_receive_channel_keeps_its_invariants_whenever_the_block_is_left(
        items: int, gaps: list[float], end: str, stubborn: bool, max_buffer: int,
        batches: bool, read_gap: float, cancel_at: float | None) -> None:
    """Items in order, each once, none after the end; the source's error raised once and
    mapped; no asyncio task left; leaving bounded by the source's own unwinding."""
    grace = 5.0

    async def source():
        for i in range(items):
            try:
                await asyncio.sleep(gaps[i])
            except asyncio.CancelledError:
                if not stubborn:
                    raise
                await asyncio.sleep(0.5)   # ignores its cancellation briefly, then goes on
            yield i
        if end == "raise":
            raise _SourceFailed("source failed")
        if end == "hang":
            await asyncio.sleep(1000)

    got: list[int] = []
    ends: list[str] = []

    async def main() -> None:
        async with open_bridge(cancel_grace=grace) as bridge:
            with trio.move_on_after(1000 if cancel_at is None else cancel_at):
                async with bridge.open_receive_channel(
                        source(), max_buffer_size=max_buffer,
                        map_error=lambda e: _Mapped(str(e))) as chan:
                    try:
                        while True:
                            if batches:
                                batch = await chan.receive_batch()
                                assert batch
                                got.extend(batch)
                            else:
                                got.append(await chan.receive())
                            assert not ends
                            await trio.sleep(read_gap)
                    except trio.EndOfChannel:
                        ends.append("end")
                    except _Mapped:
                        ends.append("error")
                    # the end is reported once: after it, only EndOfChannel
                    with pytest.raises(trio.EndOfChannel):
                        await chan.receive()
            t_left = trio.current_time()
            assert bridge.statistics().asyncio_tasks == 0
        # leaving: at most the source's own half second of ignoring a cancellation
        assert trio.current_time() - t_left <= 0.5 + 1e-9

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert got == list(range(len(got)))
    if ends:
        assert len(got) == items
        assert ends == [{"end": "end", "raise": "error"}[end]]
    else:
        assert cancel_at is not None or end == "hang"


@settings(deadline=None, max_examples=200)
@given(items=st.integers(0, 8), fail_at=st.one_of(st.none(), st.integers(0, 3)),
       consume_time=st.sampled_from([0.0, 0.5, 2.0]), max_buffer=st.integers(1, 3),
       nowait=st.lists(st.booleans(), min_size=8, max_size=8),
       cancel_at=st.sampled_from([None, 0.0, 0.5, 1.0, 2.5, 5.0]))
def test_a_send_channel_keeps_its_invariants_whenever_the_block_is_left(
        items: int, fail_at: int | None, consume_time: float, max_buffer: int,
        nowait: list[bool], cancel_at: float | None) -> None:
    """Consumed in order, each once; a clean ``aclose`` means everything arrived; the
    consumer's error raised (mapped); no asyncio task left."""
    consumed: list[int] = []
    batches = 0
    outcome: list[str] = []

    async def consumer(batch: list[int]) -> None:
        nonlocal batches
        if batches == fail_at:
            raise _SourceFailed("consumer failed")
        batches += 1
        await asyncio.sleep(consume_time)
        consumed.extend(batch)

    async def main() -> None:
        async with open_bridge() as bridge:
            with trio.move_on_after(1000 if cancel_at is None else cancel_at):
                async with bridge.open_send_channel(
                        consumer, max_buffer_size=max_buffer,
                        map_error=lambda e: _Mapped(str(e))) as chan:
                    try:
                        for i in range(items):
                            if nowait[i]:
                                try:
                                    chan.send_nowait(i)
                                    continue
                                except trio.WouldBlock:
                                    pass
                            await chan.send(i)
                        await chan.aclose()
                        outcome.append("closed")
                    except _Mapped:
                        outcome.append("error")
            assert bridge.statistics().asyncio_tasks == 0
            assert chan.finished

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert consumed == list(range(len(consumed)))
    if outcome == ["closed"]:
        assert consumed == list(range(items))
    elif outcome == ["error"]:
        assert fail_at is not None
    else:
        assert cancel_at is not None


# -- run_trio_in_thread: cancelled before, as, and after the run starts or ends ----------------
@pytest.mark.parametrize("work", ["forever", "returns"])
def test_run_trio_in_thread_cancelled_at_any_moment_leaves_no_run_behind(work: str) -> None:
    """The asyncio caller is cancelled after 0, 1, 2, ... loop turns: before the thread
    started, before the Trio run published its cancel scope, while it runs, as it returns.
    The caller always ends promptly (cancelled, or with the result if the run beat the
    cancel), the Trio work is cancelled if it started and did not return, and the thread
    ends."""
    import threading

    async def trio_work(log: list[str]) -> str:
        log.append("started")
        try:
            if work == "forever":
                await trio.sleep_forever()
            return "result"
        except trio.Cancelled:
            log.append("cancelled")
            raise

    async def main() -> None:
        for turns in range(40):
            log: list[str] = []
            name = f"attack-{work}-{turns}"
            task = asyncio.ensure_future(run_trio_in_thread(trio_work, log, name=name,
                                                            cancel_grace=5.0))
            for _ in range(turns):
                await asyncio.sleep(0)
            task.cancel()
            try:
                result = await asyncio.wait_for(asyncio.shield(task), 5.0)
            except asyncio.CancelledError:
                assert log in ([], ["started", "cancelled"]) or (
                    work == "returns" and log == ["started"])
            else:
                assert work == "returns" and result == "result" and log == ["started"]
            for thread in threading.enumerate():
                if thread.name == name:
                    thread.join(5.0)
                    assert not thread.is_alive()

    loop = asyncio.SelectorEventLoop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
