"""``aclosing`` closes what it was given on the way out (normally, on an error, when
cancelled) and passes anything without ``aclose`` through."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from agents_trio._iterators import aclosing


class _Closable:
    def __init__(self) -> None:
        self.calls = 0    # aclose() called
        self.closed = 0   # aclose() got past its checkpoint

    def __aiter__(self) -> _Closable:
        return self

    async def __anext__(self) -> int:
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self.calls += 1
        await trio.lowlevel.checkpoint_if_cancelled()
        self.closed += 1


class _Plain:
    def __aiter__(self) -> _Plain:
        return self

    async def __anext__(self) -> int:
        raise StopAsyncIteration


async def test_the_iterator_is_closed_once_on_the_way_out() -> None:
    it = _Closable()
    async with aclosing(it) as got:
        assert got is it
        assert it.closed == 0
    assert it.closed == 1


async def test_an_error_in_the_block_closes_and_propagates() -> None:
    it = _Closable()
    with pytest.raises(ValueError, match="boom"):
        async with aclosing(it):
            raise ValueError("boom")
    assert it.closed == 1


async def test_a_generator_stopped_midway_runs_its_finally_when_cancelled(
        autojump_clock: trio.testing.MockClock) -> None:
    finished: list[str] = []

    async def numbers() -> AsyncIterator[int]:
        try:
            for i in range(10):
                yield i
                await trio.sleep(1)
        finally:
            finished.append("closed")

    with trio.move_on_after(0.5):
        async with aclosing(numbers()) as items:
            async for _ in items:
                pass
    assert finished == ["closed"]


async def test_an_iterator_without_aclose_passes_through() -> None:
    it = _Plain()
    async with aclosing(it) as got:
        assert got is it


async def test_the_close_is_called_even_when_the_block_was_cancelled(
        autojump_clock: trio.testing.MockClock) -> None:
    it = _Closable()
    with trio.CancelScope() as scope:
        async with aclosing(it):
            scope.cancel()
            await trio.sleep(1)
    # called once; awaited in the cancelled scope, it stopped at its checkpoint
    assert (it.calls, it.closed) == (1, 0)
