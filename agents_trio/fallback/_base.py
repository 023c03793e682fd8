"""What the LLM, STT and TTS fallback adapters share: which model is available, the
availability events, and the nursery that owns the recovery probes.

The probes are tasks of the adapter's own nursery, which lives while the adapter is open
(``async with adapter:``). Leaving the block cancels the probes still running; a request on
an adapter that is not open raises ``RuntimeError``, so no probe ever runs without an owner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar

import trio

M = TypeVar("M")
Self = TypeVar("Self", bound="FallbackBase[Any]")


@dataclass
class ModelStatus:
    available: bool = True
    probing: bool = False
    selection_id: int = 0  # sticky LLMs: the latest attempt that picked this model


async def yield_to_cancellation() -> None:
    """Raise ``trio.Cancelled`` when the caller is being cancelled; else a no-op.

    Called when a model fails, before the failure counts: a model on the asyncio bridge
    reports its cancelled request as its own error (``Bridge.run``: "the task's own error if
    it failed while unwinding"), so an error that reaches a cancelled caller is the echo of
    its cancellation, not a fault of the model. The cancellation goes on: the model is not
    marked unavailable, the next one is not tried, none is probed.
    """
    await trio.lowlevel.checkpoint_if_cancelled()


def label(model: object) -> str:
    return str(getattr(model, "label", None) or type(model).__name__)


class FallbackBase(Generic[M]):
    """Availability bookkeeping for ``models`` (most preferred first). ``event`` is the
    name of the availability event; ``make_event(model, available)`` builds its payload."""

    def __init__(self, models: list[M], *, kind: str,
                 make_event: Callable[[M, bool], object]) -> None:
        if len(models) < 1:
            raise ValueError(f"at least one {kind.upper()} instance must be provided")
        self.models = list(models)
        self.event_name = f"{kind}_availability_changed"
        self._kind = kind
        self._make_event = make_event
        self.status = [ModelStatus() for _ in self.models]
        self._callbacks: dict[str, list[Callable[[Any], object]]] = {}
        self._nursery: trio.Nursery | None = None
        self._stack: AsyncExitStack | None = None

    # -- lifetime: the nursery of the recovery probes -----------------------------------------
    async def __aenter__(self: Self) -> Self:
        """Open the nursery of the recovery probes.

        Cancellation: nothing is opened when it is cancelled.
        """
        if self._stack is not None:
            raise RuntimeError("the FallbackAdapter is already open")
        stack = AsyncExitStack()
        self._nursery = await stack.enter_async_context(trio.open_nursery())
        self._stack = stack
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        """Cancel the probes still running and wait for them to end.

        Cancellation: the probes are cancelled already; it returns once they ended.
        """
        stack, self._stack = self._stack, None
        assert stack is not None and self._nursery is not None
        self._nursery.cancel_scope.cancel()
        self._nursery = None
        await stack.__aexit__(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Nothing beyond leaving the ``async with`` block (which cancels the probes).

        Cancellation: a no-op; nothing to cancel.
        """

    def check_open(self) -> None:
        if self._nursery is None:
            raise RuntimeError(f"open the FallbackAdapter first (async with "
                               f"{self._kind}.FallbackAdapter(...) as x:): it owns the "
                               "recovery probes")

    # -- events -------------------------------------------------------------------------------
    def on(self, event: str, callback: Callable[[Any], object] | None = None
           ) -> Callable[[Any], object]:
        """Register ``callback`` for ``event`` (the availability event); usable as a
        decorator."""
        def register(cb: Callable[[Any], object]) -> Callable[[Any], object]:
            self._callbacks.setdefault(event, []).append(cb)
            return cb
        return register(callback) if callback is not None else register

    def once(self, event: str, callback: Callable[[Any], object]) -> None:
        """Register ``callback`` for the next ``event`` only."""
        def first(payload: object) -> None:
            self.off(event, first)
            callback(payload)
        self.on(event, first)

    def off(self, event: str, callback: Callable[[Any], object]) -> None:
        callbacks = self._callbacks.get(event, [])
        if callback in callbacks:
            callbacks.remove(callback)

    def emit(self, event: str, payload: object) -> None:
        for cb in list(self._callbacks.get(event, [])):
            cb(payload)

    # -- availability -------------------------------------------------------------------------
    def available(self, model: M) -> bool:
        """Whether ``model`` (one of the adapter's models) is considered available."""
        return self.status[self.models.index(model)].available

    def all_failed(self) -> bool:
        return not any(s.available for s in self.status)

    def set_available(self, index: int, available: bool) -> None:
        status = self.status[index]
        if status.available != available:
            status.available = available
            self.emit(self.event_name, self._make_event(self.models[index], available))

    def start_probe(self, index: int, probe: Callable[[], Awaitable[bool]]) -> None:
        """Start ``probe()`` in the adapter's nursery unless the model is available or
        already probed; it returns True when the model answered (it is then available)."""
        status = self.status[index]
        if status.probing or status.available or self._nursery is None:
            return
        status.probing = True

        async def run() -> None:
            try:
                recovered = await probe()
            finally:
                status.probing = False
            if recovered:
                self.set_available(index, True)

        self._nursery.start_soon(run)
