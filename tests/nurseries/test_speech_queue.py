from __future__ import annotations

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio.nurseries import PriorityQueue


def test_priority_then_fifo():
    q: PriorityQueue[str] = PriorityQueue()
    for item, priority in [("a", 0), ("b", 2), ("c", 1), ("d", 2), ("e", 0)]:
        q.put_nowait(item, priority)
    assert len(q) == 5
    assert list(q) == ["b", "d", "c", "a", "e"]
    assert len(q) == 5
    assert [q.get_nowait() for _ in range(5)] == ["b", "d", "c", "a", "e"]
    with pytest.raises(trio.WouldBlock):
        q.get_nowait()


def test_remove():
    q: PriorityQueue[str] = PriorityQueue()
    q.put_nowait("x", 1)
    q.put_nowait("y", 2)
    q.put_nowait("x", 3)
    assert q.remove("x") is True  # the first in pop order: x@3
    assert list(q) == ["y", "x"]
    assert q.remove("missing") is False
    assert [q.get_nowait(), q.get_nowait()] == ["y", "x"]
    assert q.remove("x") is False


async def test_get_waits_for_item(autojump_clock):
    q: PriorityQueue[str] = PriorityQueue()
    got = []

    async def getter():
        got.append((await q.get(), trio.current_time()))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(getter)
            await trio.sleep(3)
            assert got == []
            q.put_nowait("hello", 0)
    assert got == [("hello", pytest.approx(3))]


async def test_cancelled_get_loses_nothing(autojump_clock):
    q: PriorityQueue[int] = PriorityQueue()
    with trio.move_on_after(1):
        await q.get()
    q.put_nowait(1, 0)
    with trio.CancelScope() as scope:
        scope.cancel()
        await q.get()  # already cancelled: raises before taking the item
    assert scope.cancelled_caught and len(q) == 1
    assert await q.get() == 1


async def test_close_drains_then_raises():
    q: PriorityQueue[str] = PriorityQueue()
    q.put_nowait("left", 0)
    q.close()
    assert q.closed
    with pytest.raises(trio.ClosedResourceError):
        q.put_nowait("late", 0)
    assert await q.get() == "left"
    with pytest.raises(trio.ClosedResourceError):
        await q.get()
    with pytest.raises(trio.ClosedResourceError):
        q.get_nowait()


async def test_close_wakes_waiting_getter(autojump_clock):
    q: PriorityQueue[str] = PriorityQueue()
    errors = []

    async def getter():
        try:
            await q.get()
        except trio.ClosedResourceError as exc:
            errors.append(exc)

    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(getter)
            await trio.testing.wait_all_tasks_blocked()
            q.close()
    assert len(errors) == 1


ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(-3, 3)),
        st.tuples(st.just("get"), st.none()),
        st.tuples(st.just("remove"), st.integers(0, 4)),
    ),
    max_size=60,
)


@settings(deadline=None)  # a pure model check: no wall-clock deadline on a loaded machine
@given(ops)
def test_matches_sorted_list_model(operations):
    q: PriorityQueue[int] = PriorityQueue()
    model: list[tuple[int, int, int]] = []  # (-priority, seq, item), kept sorted
    seq = 0
    for op, arg in operations:
        if op == "put":
            item = seq % 4
            q.put_nowait(item, arg)
            model.append((-arg, seq, item))
            model.sort()
            seq += 1
        elif op == "get":
            if model:
                assert q.get_nowait() == model.pop(0)[2]
            else:
                with pytest.raises(trio.WouldBlock):
                    q.get_nowait()
        else:
            index = next((i for i, entry in enumerate(model) if entry[2] == arg), None)
            assert q.remove(arg) is (index is not None)
            if index is not None:
                del model[index]
        assert len(q) == len(model)
        assert list(q) == [item for _, _, item in model]


async def test_a_get_woken_by_a_put_returns_in_the_step_it_wakes_in(autojump_clock):
    # parking was the checkpoint: no second schedule point before the item is returned
    q: PriorityQueue[str] = PriorityQueue()
    got: list[str] = []
    steps: list[str] = []

    class GetterSteps(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            if task.name == "getter":
                steps.append(task.name)

    async def getter() -> None:
        got.append(await q.get())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(getter, name="getter")
        await trio.testing.wait_all_tasks_blocked()
        instrument = GetterSteps()
        trio.lowlevel.add_instrument(instrument)
        q.put_nowait("a", 0)
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.remove_instrument(instrument)
    assert got == ["a"]
    assert len(steps) == 1


async def test_a_get_that_finds_an_item_is_still_a_checkpoint(autojump_clock):
    q: PriorityQueue[str] = PriorityQueue()
    q.put_nowait("a", 0)
    with trio.CancelScope() as scope:
        scope.cancel()
        await q.get()
    assert scope.cancelled_caught
    assert q.get_nowait() == "a"


async def test_a_second_waiting_consumer_is_refused(autojump_clock):
    q: PriorityQueue[str] = PriorityQueue()
    got: list[str] = []

    async def getter() -> None:
        got.append(await q.get())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(getter)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.BusyResourceError):
            await q.get()
        q.put_nowait("a", 0)
    assert got == ["a"]
