"""The unwrapping nursery: one error escapes as itself (its cause kept), several as a group."""

from __future__ import annotations

import sys

import pytest
import trio

from agents_trio.nurseries import open_unwrapping_nursery, single_leaf, unwrap_single_error

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup


async def test_a_single_error_of_the_body_escapes_as_itself_with_its_cause() -> None:
    cause = KeyError("k")
    with pytest.raises(ValueError) as info:
        async with open_unwrapping_nursery():
            try:
                raise cause
            except KeyError as e:
                raise ValueError("body") from e
    assert info.value.__cause__ is cause
    assert info.value.__suppress_context__


async def test_a_single_error_of_a_child_escapes_as_itself() -> None:
    async def fail() -> None:
        raise ValueError("child")

    with pytest.raises(ValueError, match="child"):
        async with open_unwrapping_nursery() as nursery:
            nursery.start_soon(fail)
            await trio.sleep_forever()


async def test_several_errors_escape_as_the_group() -> None:
    async def fail(n: int) -> None:
        raise ValueError(n)

    with pytest.raises(BaseExceptionGroup) as info:
        async with open_unwrapping_nursery() as nursery:
            nursery.start_soon(fail, 1)
            nursery.start_soon(fail, 2)
    assert len(info.value.exceptions) == 2


def test_single_leaf_unwraps_nested_single_groups_only() -> None:
    leaf = ValueError("leaf")
    assert single_leaf(ExceptionGroup("a", [ExceptionGroup("b", [leaf])])) is leaf
    pair = ExceptionGroup("a", [leaf, KeyError("k")])
    assert single_leaf(pair) is pair
    assert single_leaf(leaf) is leaf


def test_unwrap_single_error_works_around_any_block() -> None:
    cause = KeyError("k")
    with pytest.raises(ValueError) as info, unwrap_single_error():
        raise ExceptionGroup("g", [ExceptionGroup("h", [ValueError("leaf")])]) from None
    assert info.value.args == ("leaf",)
    leaf = ValueError("with a cause")
    leaf.__cause__ = cause
    with pytest.raises(ValueError) as info, unwrap_single_error():
        raise ExceptionGroup("g", [leaf])
    assert info.value is leaf and leaf.__cause__ is cause
