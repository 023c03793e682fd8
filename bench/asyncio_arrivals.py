"""When the fakes' data arrives, on asyncio (LiveKit Agents' and Pipecat's sides), and the
fake network that hands out the input frames through it.

The counterpart of ``trio_side.Arrivals``: the network's frames, the LLM's tokens, the TTS's
audio and the end of the sink's playout arrive the way a real client's data does, through
the loop's I/O wait. One kernel timer (``bench/kernel_timer.py``) per loop, watched with
``add_reader``, is armed for the earliest due arrival (the time left rounded up to whole
milliseconds, as an epoll timeout is); when it fires, every waiter whose data has come is
woken. Without kernel timers (not Linux) and on a loop whose clock is not the kernel's
(``bench.virtual_asyncio``), the loop's own timer (``call_at``) stands in.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any

from . import common, kernel_timer


class Arrivals:
    """``until(due)`` returns when ``due`` comes; ``at(due, callback)`` calls back then."""

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []   # [due, seq, future or callback, None once dropped]
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: kernel_timer.KernelTimer | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._armed = math.inf

    async def until(self, due: float) -> None:
        loop = asyncio.get_running_loop()
        if due <= loop.time():
            await asyncio.sleep(0)
            return
        future = loop.create_future()
        entry = self._add(loop, due, future)
        try:
            await future
        finally:
            entry[2] = None

    def at(self, due: float, callback: Callable[[], object]) -> list[Any]:
        """Call ``callback`` when ``due`` comes; ``cancel`` the returned entry to drop it."""
        return self._add(asyncio.get_running_loop(), due, callback)

    @staticmethod
    def cancel(entry: list[Any]) -> None:
        entry[2] = None

    def close(self) -> None:
        """Stop watching the kernel timer (the loop's run is ending)."""
        if self._timer is not None and self._loop is not None:
            self._loop.remove_reader(self._timer.fd)
            self._timer.close()
            self._timer = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _add(self, loop: asyncio.AbstractEventLoop, due: float, waiter: Any) -> list[Any]:
        if self._loop is None:
            self._start(loop)
        entry = [due, next(self._seq), waiter]
        heapq.heappush(self._heap, entry)
        if due < self._armed:
            self._arm(due)
        return entry

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        # a kernel timer only where the loop's clock is the kernel's monotonic clock (not the
        # virtual time of ``bench.virtual_asyncio``)
        if kernel_timer.available() and type(loop).time is asyncio.BaseEventLoop.time:
            self._timer = kernel_timer.KernelTimer()
            loop.add_reader(self._timer.fd, self._fired)

    def _arm(self, due: float) -> None:
        self._armed = due
        loop = self._loop
        assert loop is not None
        if self._timer is not None:
            self._timer.arm(kernel_timer.rounded_up(due - loop.time()))
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = loop.call_at(due, self._fired)

    def _fired(self) -> None:
        if self._timer is not None:
            self._timer.consume()
        self._handle = None
        self._armed = math.inf
        assert self._loop is not None
        t = self._loop.time()
        heap = self._heap
        while heap and heap[0][0] <= t:
            waiter = heapq.heappop(heap)[2]
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_result(None)
            elif waiter is not None:
                waiter()
        if heap:
            self._arm(heap[0][0])


class Network(common.Network):
    """The fake network (``common.Network``) on asyncio (LiveKit Agents' and Pipecat's
    sides): its frames and the fake services' data arrive through one ``Arrivals``."""

    def __init__(self) -> None:
        self.arrivals = Arrivals()
        super().__init__(asyncio.Event, self.arrivals.until, _now)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            self.arrivals.close()


def _now() -> float:
    return asyncio.get_running_loop().time()
