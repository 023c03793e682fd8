from __future__ import annotations

import gc

import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents_trio.nurseries import Flag


def _tracked_parts(flag: Flag) -> list[object]:
    """What the flag holds besides plain values: containers the garbage collector walks (an
    empty one too, which a collection may stop tracking for a while)."""
    return [o for o in gc.get_referents(flag) if not isinstance(o, (bool, type(None), type))]


def test_an_idle_flag_holds_nothing_the_collector_walks():
    flag = Flag()
    assert gc.is_tracked(flag)
    assert _tracked_parts(flag) == []
    flag.set()
    assert _tracked_parts(flag) == []


def test_a_flag_is_not_a_bool():
    with pytest.raises(TypeError):
        bool(Flag())


async def test_set_before_wait_returns_at_once(autojump_clock):
    flag = Flag()
    assert not flag.is_set()
    flag.set()
    flag.set()  # idempotent
    assert flag.is_set()
    start = trio.current_time()
    await flag.wait()
    assert trio.current_time() == start


async def test_set_wakes_every_waiter(autojump_clock):
    flag = Flag()
    woken: list[tuple[str, float]] = []

    async def waiter(name: str) -> None:
        await flag.wait()
        woken.append((name, trio.current_time()))

    async with trio.open_nursery() as nursery:
        for name in "abc":
            nursery.start_soon(waiter, name)
        await trio.sleep(1)
        assert woken == []
        assert flag.statistics().tasks_waiting == 3
        assert _tracked_parts(flag) != []  # the waiters are kept while they wait
        flag.set()
        assert flag.statistics().tasks_waiting == 0
    assert sorted(woken) == [("a", 1), ("b", 1), ("c", 1)]
    assert _tracked_parts(flag) == []


async def test_a_cancelled_wait_leaves_nothing_behind(autojump_clock):
    flag = Flag()
    with trio.move_on_after(1) as scope:
        await flag.wait()
    assert scope.cancelled_caught
    assert flag.statistics().tasks_waiting == 0
    assert _tracked_parts(flag) == []
    assert not flag.is_set()


async def test_a_cancelled_wait_leaves_the_others_waiting(autojump_clock):
    flag = Flag()
    woken: list[str] = []

    async def waiter(name: str) -> None:
        await flag.wait()
        woken.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "a")
        with trio.move_on_after(1):
            await flag.wait()
        assert flag.statistics().tasks_waiting == 1
        nursery.start_soon(waiter, "b")
        await trio.testing.wait_all_tasks_blocked()
        assert flag.statistics().tasks_waiting == 2
        flag.set()
    assert sorted(woken) == ["a", "b"]


async def test_a_wait_on_a_set_flag_is_a_checkpoint():
    flag = Flag()
    flag.set()
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await flag.wait()
    with trio.testing.assert_checkpoints():
        await flag.wait()


async def test_a_waiter_cancelled_in_the_step_that_sets_the_flag_is_woken_not_cancelled():
    """set() wakes the waiter first: a cancel after it does not un-wake it (as trio.Event)."""
    flag = Flag()
    outcome: list[str] = []

    async def waiter(scope: trio.CancelScope) -> None:
        with scope:
            await flag.wait()
            outcome.append("woken")

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, scope)
        await trio.testing.wait_all_tasks_blocked()
        flag.set()
        scope.cancel()
    assert outcome == ["woken"]


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(st.tuples(st.sampled_from(["wait", "cancel", "set"]), st.integers(0, 5)),
                max_size=20))
@example([("wait", 0), ("cancel", 0)])
@example([("wait", 0), ("wait", 0), ("cancel", 1), ("wait", 0), ("set", 0), ("cancel", 0)])
def test_waiters_end_as_the_flag_says(ops: list[tuple[str, int]]) -> None:
    """Any interleaving of waits, cancelled waits and sets: every waiter still running when
    the flag is set is woken, a cancelled one is not, and none is left waiting after set."""

    async def scenario() -> None:
        flag = Flag()
        scopes: list[trio.CancelScope] = []
        result: dict[int, str] = {}
        expected: dict[int, str] = {}

        async def waiter(i: int, scope: trio.CancelScope) -> None:
            with scope:
                await flag.wait()
                result[i] = "woken"
                return
            result[i] = "cancelled"

        async with trio.open_nursery() as nursery:
            for op, arg in ops:
                if op == "wait":
                    i = len(scopes)
                    scopes.append(trio.CancelScope())
                    nursery.start_soon(waiter, i, scopes[i])
                    if flag.is_set():
                        expected[i] = "woken"
                elif op == "cancel" and scopes:
                    i = arg % len(scopes)
                    if i not in expected:
                        expected[i] = "cancelled"
                        scopes[i].cancel()
                elif op == "set":
                    for i in range(len(scopes)):
                        expected.setdefault(i, "woken")
                    flag.set()
                await trio.testing.wait_all_tasks_blocked()
                waiting = len(scopes) - len(result)
                assert flag.statistics().tasks_waiting == waiting
                assert (_tracked_parts(flag) == []) == (waiting == 0)
            flag.set()
            for i in range(len(scopes)):
                expected.setdefault(i, "woken")
        assert result == expected

    trio.run(scenario)
