from __future__ import annotations

import gc

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio.nurseries import Pipe


async def test_items_come_out_in_order_then_the_end(autojump_clock):
    pipe: Pipe[int] = Pipe()
    received: list[tuple[int, float]] = []

    async def receiver() -> None:
        async for item in pipe:
            received.append((item, trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        pipe.send_nowait(1)
        await trio.sleep(1)
        pipe.send_nowait(2)
        pipe.send_nowait(3)
        await trio.sleep(1)
        async with pipe:  # closes it
            pipe.send_nowait(4)
    assert received == [(1, 0), (2, 1), (3, 1), (4, 2)]
    with pytest.raises(trio.EndOfChannel):
        await pipe.receive()


async def test_receive_is_a_checkpoint_even_with_an_item_waiting():
    pipe: Pipe[str] = Pipe()
    pipe.send_nowait("x")
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await pipe.receive()
    assert pipe.receive_nowait() == "x"  # the cancelled receive took nothing


async def test_a_cancelled_receive_takes_nothing_and_frees_the_receiving_side(autojump_clock):
    pipe: Pipe[str] = Pipe()
    with trio.move_on_after(1) as scope:
        await pipe.receive()
    assert scope.cancelled_caught
    pipe.send_nowait("a")
    assert await pipe.receive() == "a"


async def test_receive_nowait_says_empty_or_ended():
    pipe: Pipe[str] = Pipe()
    with pytest.raises(trio.WouldBlock):
        pipe.receive_nowait()
    pipe.send_nowait("a")
    pipe.close()
    pipe.close()  # idempotent
    assert pipe.receive_nowait() == "a"
    with pytest.raises(trio.EndOfChannel):
        pipe.receive_nowait()
    with pytest.raises(trio.ClosedResourceError):
        pipe.send_nowait("late")


async def test_a_second_receiver_at_once_is_an_error():
    pipe: Pipe[str] = Pipe()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pipe.receive)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.BusyResourceError):
            await pipe.receive()
        pipe.send_nowait("for the first")


async def test_take_hands_over_bursts_and_none_at_the_end(autojump_clock):
    pipe: Pipe[int] = Pipe()
    for i in range(5):
        pipe.send_nowait(i)
    assert await pipe.take(3) == [0, 1, 2]
    pipe.close()
    assert await pipe.take(3) == [3, 4]
    assert await pipe.take(3) is None


def test_a_pipe_holds_no_trio_primitive_waiting_or_not():
    # the reason it exists: a channel pair is eight objects, and a speech makes several per turn
    async def main() -> None:
        pipe: Pipe[int] = Pipe()
        before = len(gc.get_referents(pipe))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pipe.receive)
            await trio.testing.wait_all_tasks_blocked()
            held = [o for o in gc.get_referents(pipe) if gc.is_tracked(o) and not isinstance(o, type)]
            # the deque and the wake-up (which holds only the waiting task)
            assert {type(o).__name__ for o in held} <= {"deque", "SingleWakeup"}
            pipe.send_nowait(1)
        assert len(gc.get_referents(pipe)) == before

    trio.run(main)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["send", "pause", "cancel_receive"]),
                          st.integers(0, 3)), max_size=30),
       st.random_module())
def test_every_item_is_received_once_in_order(steps, _random):
    """However sends, schedule points and cancelled receives interleave, the receiver gets
    every item exactly once, in the order sent."""
    async def main() -> None:
        pipe: Pipe[int] = Pipe()
        sent: list[int] = []
        got: list[int] = []
        receiving: list[trio.CancelScope] = []

        async def receiver() -> None:
            while True:
                with trio.CancelScope() as scope:
                    receiving.append(scope)
                    try:
                        got.append(await pipe.receive())
                    except trio.EndOfChannel:
                        return
                    finally:
                        receiving.remove(scope)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(receiver)
            for kind, k in steps:
                if kind == "send":
                    for _ in range(k):
                        pipe.send_nowait(len(sent))
                        sent.append(len(sent))
                elif kind == "pause":
                    for _ in range(k):
                        await trio.lowlevel.checkpoint()
                else:
                    for scope in receiving:
                        scope.cancel()
            pipe.close()
        assert got == sent

    trio.run(main)


@pytest.mark.parametrize("how", ["receive", "take"])
async def test_an_item_taken_during_a_receives_schedule_point_is_not_an_end(autojump_clock, how):
    """Two receivers find the one item there, and both pass their schedule point before
    either takes it: the one that comes second waits for the next item. It must not see a
    spurious end (take() returning None on an open pipe) nor trio.WouldBlock, which receive()
    never raises."""
    pipe: Pipe[int] = Pipe()
    pipe.send_nowait(1)
    got: list[object] = []

    async def receiver() -> None:
        try:
            got.append(await pipe.receive() if how == "receive" else await pipe.take(10))
        except Exception as exc:  # what escapes is what the test looks at
            got.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        assert got == ([1] if how == "receive" else [[1]])  # the other one still waits
        pipe.send_nowait(2)
    assert got == ([1, 2] if how == "receive" else [[1], [2]])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["send", "pause", "cancel_receive", "nowait"]),
                          st.integers(0, 3)), max_size=30),
       st.sampled_from(["receive", "take"]),
       st.random_module())
def test_an_item_goes_to_exactly_one_taker_and_the_end_only_after_the_close(steps, how, _random):
    """A receiving task (receive() or take(), cancelled now and then) and receive_nowait()
    calls from another task share the items: each item is taken exactly once, each taker
    gets its items in the order sent, and the receiver sees the end only once the pipe was
    closed and emptied."""
    async def main() -> None:
        pipe: Pipe[int] = Pipe()
        sent: list[int] = []
        received: list[int] = []
        snatched: list[int] = []
        receiving: list[trio.CancelScope] = []
        closed = False

        async def receiver() -> None:
            while True:
                with trio.CancelScope() as scope:
                    receiving.append(scope)
                    try:
                        if how == "receive":
                            try:
                                received.append(await pipe.receive())
                            except trio.EndOfChannel:
                                assert closed
                                return
                        else:
                            burst = await pipe.take(2)
                            if burst is None:
                                assert closed
                                return
                            assert burst
                            received.extend(burst)
                    finally:
                        receiving.remove(scope)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(receiver)
            for kind, k in steps:
                if kind == "send":
                    for _ in range(k):
                        pipe.send_nowait(len(sent))
                        sent.append(len(sent))
                elif kind == "pause":
                    for _ in range(k):
                        await trio.lowlevel.checkpoint()
                elif kind == "nowait":
                    for _ in range(k):
                        try:
                            snatched.append(pipe.receive_nowait())
                        except trio.WouldBlock:
                            pass
                    await trio.lowlevel.checkpoint()  # the receiver runs on before the close
                else:
                    for scope in receiving:
                        scope.cancel()
            closed = True
            pipe.close()
        assert sorted(received + snatched) == sent
        assert received == sorted(received) and snatched == sorted(snatched)

    trio.run(main)
