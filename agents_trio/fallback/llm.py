"""LLM FallbackAdapter: several LLMs tried in order, with availability tracking and
recovery probes (LiveKit's ``llm.FallbackAdapter``).

A request goes to the first available LLM; when it fails (an error, or no chunk for
``attempt_timeout`` seconds), that LLM is marked unavailable (a ``llm_availability_changed``
event) and the next one is tried. An LLM that failed after it had already streamed chunks is
not replaced unless ``retry_on_chunk_sent`` (the caller would see the answer start over).
When every LLM is unavailable, all are tried again. Each unavailable LLM reached by a
request gets one background recovery probe (the same request, its answer discarded); when
the probe succeeds the LLM is available again (another event).

The probes are tasks of the adapter's own nursery, which lives while the adapter is open:
``async with FallbackAdapter([...]) as llm:``. Leaving the block cancels the probes still
running; ``chat()`` on an adapter that is not open raises ``RuntimeError``, so no probe is
ever started without an owner.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, aclosing
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import trio

from .._errors import APIConnectionError
from ..chat import ChatContext
from ..models import LLM, ChatChunk, ToolChoice

logger = logging.getLogger("agents_trio")


@dataclass
class AvailabilityChangedEvent:
    llm: LLM
    available: bool


@dataclass
class _Status:
    available: bool = True
    probing: bool = False
    selection_id: int = 0  # for sticky: the latest attempt that picked this LLM


@dataclass
class _Request:
    chat_ctx: ChatContext
    tools: list[Any] | None
    tool_choice: ToolChoice | None


def _label(llm: object) -> str:
    return str(getattr(llm, "label", None) or type(llm).__name__)


class FallbackAdapter:
    """An LLM made of several LLMs, tried in order (see the module docstring).

    Args:
        llm: The LLMs, most preferred first.
        attempt_timeout: Seconds an attempt may wait for its next chunk (the first one
            included) before it counts as failed.
        max_retry_per_llm: Retries of a retryable failure on the same LLM before moving on
            (0: move on at once).
        retry_interval: Seconds between those retries.
        retry_on_chunk_sent: Move on to the next LLM even after the failing one streamed
            chunks (the answer then starts over).
        sticky: Keep using the LLM that last answered until it fails, even when a preferred
            one has recovered.

    Raises:
        ValueError: No LLM, or a negative timeout, retry count or interval.
    """

    def __init__(self, llm: list[LLM], *, attempt_timeout: float = 5.0,
                 max_retry_per_llm: int = 0, retry_interval: float = 0.5,
                 retry_on_chunk_sent: bool = False, sticky: bool = False) -> None:
        if len(llm) < 1:
            raise ValueError("at least one LLM instance must be provided")
        if attempt_timeout <= 0 or max_retry_per_llm < 0 or retry_interval < 0:
            raise ValueError("attempt_timeout must be positive, max_retry_per_llm and "
                             "retry_interval not negative")
        self.llms = list(llm)
        self.attempt_timeout = attempt_timeout
        self.max_retry_per_llm = max_retry_per_llm
        self.retry_interval = retry_interval
        self.retry_on_chunk_sent = retry_on_chunk_sent
        self.sticky = sticky
        self._status = [_Status() for _ in self.llms]
        self._attempt_id = 0
        self._callbacks: dict[str, list[Callable[[Any], object]]] = {}
        self._nursery: trio.Nursery | None = None
        self._stack: AsyncExitStack | None = None

    # -- lifetime: the nursery of the recovery probes -----------------------------------------
    async def __aenter__(self) -> FallbackAdapter:
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
        self._nursery.cancel_scope.cancel()  # the probes still running
        self._nursery = None
        await stack.__aexit__(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Nothing beyond leaving the ``async with`` block (which cancels the probes).

        Cancellation: a no-op; nothing to cancel.
        """

    # -- events -------------------------------------------------------------------------------
    def on(self, event: str, callback: Callable[[Any], object] | None = None
           ) -> Callable[[Any], object]:
        """Register ``callback`` for ``event`` (``llm_availability_changed``); usable as a
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

    def _set_available(self, index: int, available: bool) -> None:
        status = self._status[index]
        if status.available != available:
            status.available = available
            self.emit("llm_availability_changed",
                      AvailabilityChangedEvent(llm=self.llms[index], available=available))

    def available(self, llm: LLM) -> bool:
        """Whether ``llm`` (one of :attr:`llms`) is currently considered available."""
        return self._status[self.llms.index(llm)].available

    # -- requests -----------------------------------------------------------------------------
    def _order(self) -> list[int]:
        order = list(range(len(self.llms)))
        if self.sticky:
            chosen = max(order, key=lambda i: self._status[i].selection_id
                         if self._status[i].available else 0)
            order.remove(chosen)
            order.insert(0, chosen)
        return order

    def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
             tool_choice: ToolChoice | None = None
             ) -> AbstractAsyncContextManager[AsyncIterable[ChatChunk]]:
        """The chunks of the first LLM that answers (see the module docstring).

        Raises:
            RuntimeError: The adapter is not open (``async with``).
        """
        if self._nursery is None:
            raise RuntimeError("open the FallbackAdapter first (async with FallbackAdapter(...) "
                               "as llm): it owns the recovery probes")
        return self._fallback(_Request(chat_ctx, tools, tool_choice))

    @trio.as_safe_channel
    async def _fallback(self, request: _Request) -> AsyncGenerator[ChatChunk, None]:
        start = trio.current_time()
        all_failed = not any(s.available for s in self._status)
        if all_failed:
            logger.error("all LLMs are unavailable, retrying them all")
        for i in self._order():
            llm, status = self.llms[i], self._status[i]
            if status.available or all_failed:
                self._attempt_id += 1
                attempt_id = status.selection_id = self._attempt_id
                sent = [False]
                try:
                    async with aclosing(self._attempt(llm, request, sent)) as chunks:
                        async for chunk in chunks:
                            yield chunk
                except Exception as e:
                    status.selection_id = 0
                    self._set_available(i, False)
                    if sent[0] and not self.retry_on_chunk_sent:
                        logger.error("%s failed after streaming chunks; not falling back "
                                     "(retry_on_chunk_sent is off)", _label(llm))
                        raise
                    logger.warning("%s failed, switching to the next LLM: %r",
                                   _label(llm), e)
                else:
                    status.selection_id = max(status.selection_id, attempt_id)
                    if self.sticky:
                        self._set_available(i, True)
                    return
            self._start_probe(i, request)
        raise APIConnectionError(
            f"all LLMs failed ({[_label(m) for m in self.llms]}) after "
            f"{trio.current_time() - start:.1f} seconds")

    async def _attempt(self, llm: LLM, request: _Request,
                       sent: list[bool]) -> AsyncGenerator[ChatChunk, None]:
        """One LLM's answer, retried ``max_retry_per_llm`` times on a retryable failure.
        ``sent[0]`` becomes True once a chunk went out."""
        retries = 0
        while True:
            try:
                async with llm.chat(chat_ctx=request.chat_ctx, tools=request.tools,
                                    tool_choice=request.tool_choice) as stream:
                    chunks = aiter(stream)
                    while True:
                        with trio.fail_after(self.attempt_timeout):
                            try:
                                chunk = await anext(chunks)
                            except StopAsyncIteration:
                                break
                        sent[0] = True
                        yield chunk
                return
            except Exception as e:
                retryable = isinstance(e, trio.TooSlowError) or bool(
                    getattr(e, "retryable", False))
                if (retries >= self.max_retry_per_llm or not retryable
                        or (sent[0] and not self.retry_on_chunk_sent)):
                    raise
                retries += 1
                await trio.sleep(self.retry_interval)

    def _start_probe(self, index: int, request: _Request) -> None:
        status = self._status[index]
        if status.probing or status.available or self._nursery is None:
            return
        status.probing = True
        self._nursery.start_soon(self._probe, index, request)

    async def _probe(self, index: int, request: _Request) -> None:
        llm = self.llms[index]
        try:
            async with aclosing(self._attempt(llm, request, [False])) as chunks:
                async for _ in chunks:
                    pass
        except Exception as e:
            logger.warning("%s recovery failed: %r", _label(llm), e)
            return
        finally:
            self._status[index].probing = False
        logger.info("llm.FallbackAdapter: %s recovered", _label(llm))
        self._set_available(index, True)

