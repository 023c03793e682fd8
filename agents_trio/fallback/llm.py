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
``async with FallbackAdapter([...]) as llm:`` (see ``agents_trio.fallback._base``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterable
from contextlib import AbstractAsyncContextManager, aclosing
from dataclasses import dataclass
from typing import Any

import trio

from .._errors import APIConnectionError
from ..chat import ChatContext
from ..models import LLM, ChatChunk, ToolChoice
from ._base import FallbackBase, label, yield_to_cancellation

logger = logging.getLogger("agents_trio")


@dataclass
class AvailabilityChangedEvent:
    llm: LLM
    available: bool


@dataclass
class _Request:
    chat_ctx: ChatContext
    tools: list[Any] | None
    tool_choice: ToolChoice | None


class FallbackAdapter(FallbackBase[LLM]):
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
        super().__init__(llm, kind="llm", make_event=lambda m, ok: AvailabilityChangedEvent(
            llm=m, available=ok))
        if attempt_timeout <= 0 or max_retry_per_llm < 0 or retry_interval < 0:
            raise ValueError("attempt_timeout must be positive, max_retry_per_llm and "
                             "retry_interval not negative")
        self.attempt_timeout = attempt_timeout
        self.max_retry_per_llm = max_retry_per_llm
        self.retry_interval = retry_interval
        self.retry_on_chunk_sent = retry_on_chunk_sent
        self.sticky = sticky
        self._attempt_id = 0

    # -- requests -----------------------------------------------------------------------------
    def _order(self) -> list[int]:
        order = list(range(len(self.models)))
        if self.sticky:
            chosen = max(order, key=lambda i: self.status[i].selection_id
                         if self.status[i].available else 0)
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
        self.check_open()
        return self._fallback(_Request(chat_ctx, tools, tool_choice))

    @trio.as_safe_channel
    async def _fallback(self, request: _Request) -> AsyncGenerator[ChatChunk, None]:
        start = trio.current_time()
        all_failed = self.all_failed()
        if all_failed:
            logger.error("all LLMs are unavailable, retrying them all")
        for i in self._order():
            llm, status = self.models[i], self.status[i]
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
                    self.set_available(i, False)
                    if sent[0] and not self.retry_on_chunk_sent:
                        logger.error("%s failed after streaming chunks; not falling back "
                                     "(retry_on_chunk_sent is off)", label(llm))
                        raise
                    logger.warning("%s failed, switching to the next LLM: %r",
                                   label(llm), e)
                else:
                    status.selection_id = max(status.selection_id, attempt_id)
                    if self.sticky:
                        self.set_available(i, True)
                    return
            self._start_probe(i, request)
        raise APIConnectionError(
            f"all LLMs failed ({[label(m) for m in self.models]}) after "
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
                await yield_to_cancellation()  # a cancelled caller's echo is no failure
                retryable = isinstance(e, trio.TooSlowError) or bool(
                    getattr(e, "retryable", False))
                if (retries >= self.max_retry_per_llm or not retryable
                        or (sent[0] and not self.retry_on_chunk_sent)):
                    raise
                retries += 1
                await trio.sleep(self.retry_interval)

    def _start_probe(self, index: int, request: _Request) -> None:
        llm = self.models[index]

        async def probe() -> bool:
            try:
                async with aclosing(self._attempt(llm, request, [False])) as chunks:
                    async for _ in chunks:
                        pass
            except Exception as e:
                logger.warning("%s recovery failed: %r", label(llm), e)
                return False
            logger.info("llm.FallbackAdapter: %s recovered", label(llm))
            return True

        self.start_probe(index, probe)
