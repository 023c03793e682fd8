"""``aclosing`` for the async iterators the pipeline nodes return.

The nodes are typed ``AsyncIterator`` (an override may return any async iterator), and an
async generator, the usual case, must be closed in the task that iterated it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Generic, TypeVar

logger = logging.getLogger("agents_trio")

IterableT = TypeVar("IterableT", bound=AsyncIterable[Any])


class aclosing(Generic[IterableT]):  # noqa: N801 (named as contextlib.aclosing is)
    """``async with aclosing(iterator) as it``: ``it`` is ``iterator``; on the way out it is
    closed if it can be closed (``aclose``), which ``contextlib.aclosing`` requires it to be.

    A class, not a generator-based context manager: one object per use, where the generator
    form held three for as long as the block ran (the generator, its context manager and
    Trio's weak reference to the generator), around every reply's LLM and TTS streams.

    Cancellation: the close runs on the way out even when the block was cancelled, as with
    ``contextlib.aclosing``.
    """

    __slots__ = ("_iterator",)

    def __init__(self, iterator: IterableT) -> None:
        self._iterator = iterator

    async def __aenter__(self) -> IterableT:
        return self._iterator

    async def __aexit__(self, *exc_info: object) -> None:
        aclose = getattr(self._iterator, "aclose", None)
        if aclose is not None:
            await aclose()


async def node_items(result: object, *, text: bool = False) -> AsyncIterator[Any]:
    """The iterator over the items a pipeline node override produced, whatever form it
    returned them in; the caller iterates it and closes it (``aclosing``).

    As with LiveKit, a node may return an async iterable, or a coroutine resolving to one;
    with ``text`` (the LLM node) a string too, which is one whole reply. Anything else (None
    included) produces nothing. An async iterable is iterated directly, with no layer of ours
    in between: each layer would cost a resumption per item (an audio frame, for the TTS).

    Cancellation: cancels the coroutine the node returned, if it is still awaited; nothing
    is iterated yet.
    """
    if inspect.isawaitable(result):
        result = await result
    if text and isinstance(result, str):
        return _single(result)
    if not isinstance(result, AsyncIterable):
        if result is not None:
            logger.warning("a node returned %r, which is not an async iterable; ignored",
                           type(result).__name__)
        return _nothing()
    return aiter(result)


async def _single(item: object) -> AsyncIterator[Any]:
    yield item


async def _nothing() -> AsyncIterator[Any]:
    return
    yield  # an async generator that ends at once


async def node_output(result: object, *, text: bool = False) -> AsyncIterator[Any]:
    """The items a pipeline node override produced (see ``node_items``), as one generator:
    the iterable is closed when this generator is.

    Cancellation: cancels the coroutine or the iteration; the iterable is closed.
    """
    async with aclosing(await node_items(result, text=text)) as items:
        async for item in items:
            yield item
