"""FrameFeed: frames pulled or pushed to an attached handler, each exactly once and in order."""

from __future__ import annotations

import contextvars

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio.io.frame_feed import FrameFeed

WHO = contextvars.ContextVar("WHO", default="nobody")


async def test_pulled_frames_come_in_order_then_the_end():
    feed: FrameFeed[int] = FrameFeed()
    for i in range(3):
        feed.put_nowait(i)
    feed.close()
    assert [await feed.receive() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(trio.EndOfChannel):
        await feed.receive()


async def test_attaching_hands_over_the_buffered_frames_then_each_put_in_the_producers_call():
    feed: FrameFeed[int] = FrameFeed()
    feed.put_nowait(0)
    feed.put_nowait(1)
    got: list[int] = []
    with feed.attached(got.append) as link:
        assert got == [0, 1]                 # the buffered ones, at once
        feed.put_nowait(2)
        assert got == [0, 1, 2]              # inside put_nowait: no task woke for it
        assert link.attached
    assert not link.attached
    feed.put_nowait(3)                       # detached: buffered again
    assert got == [0, 1, 2]
    assert await feed.receive() == 3


async def test_a_detached_handler_gets_nothing_more_and_a_new_one_gets_the_rest():
    feed: FrameFeed[int] = FrameFeed()
    first: list[int] = []
    second: list[int] = []
    with feed.attached(first.append) as link:
        feed.put_nowait(0)
        link.detach()                        # synchronous: the next frame is not first's
        feed.put_nowait(1)
        with feed.attached(second.append):
            feed.put_nowait(2)
    assert first == [0] and second == [1, 2]


async def test_a_failing_handler_is_detached_and_its_error_raised_in_the_attached_task(
        autojump_clock):
    feed: FrameFeed[int] = FrameFeed()
    seen: list[int] = []

    def handler(frame: int) -> None:
        if frame == 1:
            raise ValueError("bad frame")
        seen.append(frame)

    async def producer() -> None:
        for i in range(4):
            feed.put_nowait(i)               # never raises here: the error is the consumer's
            await trio.sleep(0.1)

    with pytest.raises(ValueError, match="bad frame"), feed.attached(handler) as link:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer)     # it runs to the end: the failure is not its
        await link.wait()
    assert seen == [0]
    assert [await feed.receive() for _ in range(2)] == [2, 3]   # kept for the next reader


async def test_closing_ends_the_wait_of_an_attached_consumer_and_of_a_later_one(autojump_clock):
    feed: FrameFeed[int] = FrameFeed()
    got: list[int] = []
    async with trio.open_nursery() as nursery:
        with feed.attached(got.append) as link:
            nursery.start_soon(lambda: _close_later(feed))
            await link.wait()
    later: list[int] = []
    with feed.attached(later.append) as link, trio.fail_after(1):
        await link.wait()                    # already ended: returns at once
    assert got == [7] and later == []
    with pytest.raises(trio.ClosedResourceError):
        feed.put_nowait(8)


async def test_a_closed_feed_pushes_nothing_more_even_before_its_consumer_leaves():
    feed: FrameFeed[int] = FrameFeed()
    got: list[int] = []
    with feed.attached(got.append) as link:
        feed.put_nowait(1)
        feed.close()
        assert not link.attached
        with pytest.raises(trio.ClosedResourceError):
            feed.put_nowait(2)
        await link.wait()                    # ended: returns at once
    assert got == [1]


async def test_a_consumer_attaching_to_a_closed_feed_gets_the_rest_then_nothing_more():
    feed: FrameFeed[int] = FrameFeed()
    feed.put_nowait(1)
    feed.close()
    got: list[int] = []
    with feed.attached(got.append) as link:
        assert got == [1]                    # the buffered frames, then the end
        assert not link.attached and feed.consumer is None
        with pytest.raises(trio.ClosedResourceError):
            feed.put_nowait(2)               # refused: not pushed to the ended consumer
        with feed.attached(got.append):      # the feed has no consumer: nothing is busy
            pass
        await link.wait()
    assert got == [1]


async def _close_later(feed: FrameFeed[int]) -> None:
    await trio.sleep(0.5)
    feed.put_nowait(7)
    feed.close()


async def test_only_one_consumer_attaches():
    feed: FrameFeed[int] = FrameFeed()
    with feed.attached(lambda f: None), pytest.raises(trio.BusyResourceError):
        with feed.attached(lambda f: None):
            pass


async def test_the_handler_runs_in_the_attaching_tasks_context_not_the_producers():
    feed: FrameFeed[int] = FrameFeed()
    seen: list[str] = []
    WHO.set("consumer")

    async def producer() -> None:
        WHO.set("producer")
        feed.put_nowait(1)
        feed.close()

    with feed.attached(lambda f: seen.append(WHO.get())) as link, trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(producer)
        await link.wait()
    assert seen == ["consumer"]


async def test_put_all_pushes_a_batch_in_one_step_or_waits_for_room_when_pulled():
    feed: FrameFeed[int] = FrameFeed(max_buffer_size=1)
    got: list[int] = []
    with feed.attached(got.append):
        await feed.put_all([0, 1, 2])        # no buffer involved: never waits
    assert got == [0, 1, 2]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(feed.put_all, [3, 4, 5])
        assert [await feed.receive() for _ in range(3)] == [3, 4, 5]


# -- any interleaving: each frame exactly once, in order -----------------------------------------
OPS = st.lists(st.sampled_from(["put", "put", "put", "attach", "detach", "pull", "fail",
                                "close"]), max_size=40)


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_any_interleaving_delivers_each_frame_once_in_order(ops: list[str]) -> None:
    async def main() -> None:
        feed: FrameFeed[int] = FrameFeed()
        taken: list[int] = []
        put = 0
        fail_next = False
        stack: list = []

        def handler(frame: int) -> None:
            nonlocal fail_next
            if fail_next:
                fail_next = False
                raise RuntimeError("handler failed")   # the frame is lost to this handler only
            taken.append(frame)

        failed: list[int] = []

        def failing_handler(frame: int) -> None:
            try:
                handler(frame)
            except RuntimeError:
                failed.append(frame)
                raise

        for op in ops:
            if op == "put" and not feed.closed:
                feed.put_nowait(put)
                put += 1
            elif op == "attach" and feed.consumer is None:
                cm = feed.attached(failing_handler)
                stack.append((cm, cm.__enter__()))
            elif op == "detach" and stack:
                cm, _ = stack.pop()
                cm.__exit__(None, None, None)
            elif op == "pull" and feed.consumer is None:
                try:
                    taken.append(feed.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    pass
            elif op == "fail":
                fail_next = True
            elif op == "close" and not feed.closed:
                feed.close()
        for cm, _link in stack:
            cm.__exit__(None, None, None)
        if not feed.closed:
            feed.close()
        while True:                          # what is left buffered is pulled at the end
            try:
                taken.append(await feed.receive())
            except trio.EndOfChannel:
                break
        assert sorted(taken + failed) == list(range(put))
        assert taken == sorted(taken)         # in order
        assert len(set(taken)) == len(taken)  # once

    trio.run(main)


# -- the buffer's bound (a deque, no channel: the waits are the feed's own) ---------------------
async def test_a_full_buffer_makes_the_producer_wait_and_closing_fails_its_wait(autojump_clock):
    feed: FrameFeed[int] = FrameFeed(max_buffer_size=1)
    feed.put_nowait(0)
    with pytest.raises(trio.WouldBlock):
        feed.put_nowait(1)

    async def blocked_producer() -> None:
        with pytest.raises(trio.ClosedResourceError):
            await feed.put_all([1])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(blocked_producer)
        await trio.sleep(1)
        feed.close()
    assert await feed.receive() == 0
    with pytest.raises(trio.EndOfChannel):
        await feed.receive()


async def test_a_rendezvous_feed_takes_a_frame_only_while_a_puller_waits(autojump_clock):
    feed: FrameFeed[int] = FrameFeed(max_buffer_size=0)
    with pytest.raises(trio.WouldBlock):
        feed.put_nowait(0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(feed.put_all, [1, 2, 3])
        assert [await feed.receive() for _ in range(3)] == [1, 2, 3]


async def test_a_cancelled_pull_loses_no_frame_and_two_pullers_each_get_one(autojump_clock):
    feed: FrameFeed[int] = FrameFeed()
    with trio.move_on_after(1):
        await feed.receive()
    got: list[int] = []

    async def pull() -> None:
        got.append(await feed.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pull)
        nursery.start_soon(pull)
        await trio.sleep(1)
        feed.put_nowait(1)
        feed.put_nowait(2)
    assert sorted(got) == [1, 2]


@pytest.mark.parametrize(("size", "error"), [(-1, ValueError), (1.5, TypeError)])
def test_a_bad_buffer_size_is_refused_at_construction(size: float, error: type) -> None:
    with pytest.raises(error):
        FrameFeed(size)


async def test_an_attachment_is_its_own_context_manager_attached_only_inside_its_block():
    feed: FrameFeed[int] = FrameFeed()
    feed.put_nowait(1)
    got: list[int] = []
    link = feed.attached(got.append)
    assert feed.consumer is None and got == []   # made, not yet attached
    with link as entered:
        assert entered is link and feed.consumer is link
        assert got == [1]                          # the buffered frame, on entering
        feed.put_nowait(2)
    feed.put_nowait(3)                             # detached: buffered again
    assert got == [1, 2] and feed.consumer is None
    assert feed.receive_nowait() == 3
