"""The unwrapping nursery: a single error escapes as itself, not in an ``ExceptionGroup``.

Trio's nurseries (``strict_exception_groups=True``) wrap whatever escapes them in a group, even
one error. Context managers whose own tasks catch their errors (so that only the body's error
can escape) use :func:`open_unwrapping_nursery`, and callers catch ``SomeError`` as they would
from a plain call. :func:`unwrap_single_error` does the same around any block (one that opens
nurseries inside a library, say), and :func:`single_leaf` for an exception already caught.

Chaining: the leaf is re-raised ``from`` its own ``__cause__``. Its cause (``raise
APIError(...) from plugin_error``) is kept, and the group is not shown as its context: the
group held only the leaf, so it would repeat it. A group with more than one leaf is re-raised
unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import overload

import trio

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup


@overload
def single_leaf(exc: Exception) -> Exception: ...


@overload
def single_leaf(exc: BaseException) -> BaseException: ...


def single_leaf(exc: BaseException) -> BaseException:
    """The lone leaf of nested single-exception groups; otherwise ``exc`` itself.

    Args:
        exc: Any exception; a group is unwrapped while it holds exactly one exception.

    Returns:
        The leaf, or ``exc`` when it is not a group or a group holds more than one exception.
        The leaf of an ``Exception`` is an ``Exception`` (an ``ExceptionGroup`` holds only
        those).
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextmanager
def unwrap_single_error() -> Iterator[None]:
    """``with unwrap_single_error():`` — a group holding one exception (nested or not) that
    escapes the block is re-raised as that exception (see the module doc for the chaining);
    a group of several escapes unchanged.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = single_leaf(group)
        if leaf is group:
            raise
        raise leaf from leaf.__cause__


@asynccontextmanager
async def open_unwrapping_nursery() -> AsyncIterator[trio.Nursery]:
    """``async with open_unwrapping_nursery() as nursery:`` — a nursery whose single escaping
    exception is unwrapped from its ``ExceptionGroup`` (see the module doc for the chaining).

    Raises:
        The single exception that escaped the nursery (the body's or a child's), as itself;
        several at once escape as the nursery's group.

    Cancellation:
        As ``trio.open_nursery()``: leaving the block waits for the children; an exception in
        the body cancels them. A ``Cancelled`` that escapes alone is unwrapped too, so an
        outer cancel scope catches it as usual.
    """
    with unwrap_single_error():
        async with trio.open_nursery() as nursery:
            yield nursery


__all__ = ["open_unwrapping_nursery", "single_leaf", "unwrap_single_error"]
