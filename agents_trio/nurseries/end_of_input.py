"""An iteration with no items that ends when the input does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import NoReturn

import trio

from .single_wakeup import SingleWakeup

__all__ = ["EndOfInput"]


class EndOfInput(AsyncIterator[NoReturn]):
    """The iteration of a stream whose every event is returned by its ``push_frame`` (a VAD
    that runs its model there): it yields nothing and ends once :meth:`end` was called.

    What an unbuffered memory channel that is closed at the end of input does, for one
    consumer, with far fewer objects: the iteration waits for a whole session, and every
    object it holds meanwhile is walked by each full garbage collection.
    """

    __slots__ = ("_ended", "_wakeup")

    def __init__(self) -> None:
        self._ended = False
        self._wakeup = SingleWakeup()

    @property
    def ended(self) -> bool:
        """Whether :meth:`end` was called."""
        return self._ended

    def end(self) -> None:
        """End the iteration (the input ended). Idempotent; not a checkpoint."""
        self._ended = True
        self._wakeup.notify()

    def __aiter__(self) -> EndOfInput:
        return self

    async def __anext__(self) -> NoReturn:
        """Wait until :meth:`end`, then stop the iteration.

        Raises:
            StopAsyncIteration: once :meth:`end` was called.
            trio.BusyResourceError: another task is iterating.

        Cancellation: a checkpoint, also once ended; a cancelled wait changes nothing.
        """
        if self._ended:
            await trio.lowlevel.checkpoint()
        while not self._ended:
            await self._wakeup.wait()
        raise StopAsyncIteration
