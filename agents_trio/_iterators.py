"""``aclosing`` for the async iterators the pipeline nodes return.

The nodes are typed ``AsyncIterator`` (an override may return any async iterator), and an
async generator, the usual case, must be closed in the task that iterated it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

T = TypeVar("T")


@asynccontextmanager
async def aclosing(iterator: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """Yield ``iterator``; on the way out, close it if it can be closed (``aclose``).

    Cancellation: the close runs on the way out even when the block was cancelled, as with
    ``contextlib.aclosing``.
    """
    try:
        yield iterator
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
