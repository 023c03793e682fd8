"""A LiveKit Agents ``llm.LLM`` as a Trio ``LLM``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import trio
from livekit.agents import APIConnectOptions
from livekit.agents import llm as lk_llm

from ..chat import ChatContext
from ..io.bridge import AsyncioBridge, BridgeReceiveChannel
from ..models import ChatChunk, ToolChoice
from ._common import (
    aclose_plugin_stream,
    connect_options,
    error_mapper,
    plugin_items,
    resolve_bridge,
    to_api_error,
)
from ._convert import from_lk_chunk, to_lk_chat_ctx, to_lk_tool_choice, to_lk_tools


class LLMAdapter:
    """Wraps a LiveKit Agents LLM (``openai.LLM()``, ``google.LLM()``, …) for agents_trio.

    ``chat`` converts the chat context and tools, opens the plugin's stream on the asyncio
    bridge and yields its chunks as :class:`agents_trio.ChatChunk`. Leaving the ``async with``
    (or cancelling the caller) closes the plugin stream (its ``aclose`` gets 5 s); a provider
    failure is raised as :class:`agents_trio.APIError` (the plugin's own error is its
    ``__cause__``).

    Args:
        llm: The LiveKit Agents LLM.
        bridge: The bridge to run it on (default: the current bridge at each call).
        conn_options: Retries and timeouts for the plugin (its default if None).
        max_buffer_size: Chunks buffered ahead of a slow consumer.
    """

    #: where a session or agent takes it (``llm=``)
    model_kind: ClassVar[str] = "llm"

    def __init__(self, llm: lk_llm.LLM[Any], *, bridge: AsyncioBridge | None = None,
                 conn_options: APIConnectOptions | None = None,
                 max_buffer_size: int = 64) -> None:
        if not isinstance(llm, lk_llm.LLM):
            raise TypeError(f"LLMAdapter wraps a livekit.agents.llm.LLM, got {llm!r}")
        self.llm = llm
        self._bridge = bridge
        self._conn_options = conn_options
        self._max_buffer = max_buffer_size

    @property
    def label(self) -> str:
        return self.llm.label

    @property
    def model(self) -> str:
        return self.llm.model

    @property
    def provider(self) -> str:
        return self.llm.provider

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
                   tool_choice: ToolChoice | None = None) -> AsyncIterator[_ChunkStream]:
        """Stream a completion (see the class docstring).

        Raises:
            agents_trio.APIError: The provider failed (raised while iterating, or here if the
                plugin refused the request).

        Cancellation:
            Owns the plugin stream and the bridge pump reading it; both end with the block.
        """
        bridge = await resolve_bridge(self._bridge)
        kwargs: dict[str, Any] = {"chat_ctx": to_lk_chat_ctx(chat_ctx),
                                  "tools": to_lk_tools(tools),
                                  **connect_options(self._conn_options)}
        if tool_choice is not None:
            kwargs["tool_choice"] = to_lk_tool_choice(tool_choice)
        try:
            stream = await bridge.run_sync(self.llm.chat, **kwargs)
        except Exception as e:
            raise to_api_error(e, self.label) from e
        try:
            async with bridge.open_receive_channel(
                    plugin_items(stream), max_buffer_size=self._max_buffer,
                    map_error=error_mapper(self.label)) as chunks:
                yield _ChunkStream(chunks)
        finally:
            await aclose_plugin_stream(bridge, stream, self.label)

    def __repr__(self) -> str:
        return f"LLMAdapter({self.llm!r})"


class _ChunkStream:
    """The plugin's chunks, converted; ends when the plugin's stream ends."""

    def __init__(self, chunks: BridgeReceiveChannel[Any]) -> None:
        self._chunks = chunks

    def __aiter__(self) -> _ChunkStream:
        return self

    async def __anext__(self) -> ChatChunk:
        try:
            return from_lk_chunk(await self._chunks.receive())
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
