"""A LiveKit Agents ``tts.TTS`` as a Trio ``TTS``."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import trio
from livekit import rtc
from livekit.agents import APIConnectOptions
from livekit.agents import tts as lk_tts

from ..io.bridge import AsyncioBridge, BridgeReceiveChannel
from ._common import (
    aclose_plugin_stream,
    connect_options,
    error_mapper,
    open_nursery,
    plugin_items,
    resolve_bridge,
    to_api_error,
)


class TTSAdapter:
    """Wraps a LiveKit Agents TTS (``cartesia.TTS()``, ``elevenlabs.TTS()``, …) for agents_trio.

    ``stream(text)`` synthesizes one segment: the Trio text iterable is pushed into the
    plugin's synthesis stream as it arrives (``end_input`` when it ends) and the audio comes
    back as ``rtc.AudioFrame``s. A plugin that cannot stream is wrapped in LiveKit's
    ``tts.StreamAdapter`` (sentence by sentence). Leaving the block or cancelling the caller
    closes the plugin stream (its ``aclose`` gets 5 s); a provider failure is raised as
    :class:`agents_trio.APIError`.

    Args:
        tts: The LiveKit Agents TTS.
        bridge: The bridge to run it on (default: the current bridge at each call).
        conn_options: Retries and timeouts for the plugin.
        max_buffer_size: Audio chunks buffered ahead of a slow consumer.

    Attributes:
        sample_rate, num_channels: The plugin's output format.
    """

    #: where a session or agent takes it (``tts=``)
    model_kind: ClassVar[str] = "tts"

    def __init__(self, tts: lk_tts.TTS[Any], *, bridge: AsyncioBridge | None = None,
                 conn_options: APIConnectOptions | None = None,
                 max_buffer_size: int = 64) -> None:
        if not isinstance(tts, lk_tts.TTS):
            raise TypeError(f"TTSAdapter wraps a livekit.agents.tts.TTS, got {tts!r}")
        self.wrapped = tts
        self.tts = tts if tts.capabilities.streaming else lk_tts.StreamAdapter(tts=tts)
        self.sample_rate = tts.sample_rate
        self.num_channels = tts.num_channels
        self._bridge = bridge
        self._conn_options = conn_options
        self._max_buffer = max_buffer_size

    @property
    def label(self) -> str:
        return self.wrapped.label

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]) -> AsyncIterator[_FrameStream]:
        """Synthesize ``text`` (one segment; see the class docstring).

        Raises:
            agents_trio.APIError: The provider failed (while iterating the audio), or the plugin
                refused the text (its ``push_text`` or ``end_input`` raised).
            Exception: Whatever iterating ``text`` raised.

        Cancellation:
            Owns the plugin stream, the task pushing the text and the pump reading the audio;
            all end with the block.
        """
        bridge = await resolve_bridge(self._bridge)
        try:
            stream = await bridge.run_sync(self.tts.stream,
                                           **connect_options(self._conn_options))
        except Exception as e:
            raise to_api_error(e, self.label) from e
        try:
            async with open_nursery() as nursery, bridge.open_receive_channel(
                    plugin_items(stream), max_buffer_size=self._max_buffer,
                    map_error=error_mapper(self.label)) as audio:
                nursery.start_soon(_push_text, bridge, text, stream, self.label)
                try:
                    yield _FrameStream(audio)
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            await aclose_plugin_stream(bridge, stream, self.label)

    def __repr__(self) -> str:
        return f"TTSAdapter({self.wrapped!r})"


async def _push_text(bridge: AsyncioBridge, text: AsyncIterable[str],
                     stream: lk_tts.SynthesizeStream, label: str) -> None:
    """Push ``text`` into the plugin stream as it arrives, then end its input.

    The text goes through a bridge send channel (every chunk sent since the plugin last took
    some, in one loop hop), so a plugin refusing it (its ``push_text`` or ``end_input``
    raising) fails this task, and with it the segment, instead of leaving the plugin waiting
    for an end of input that never comes.

    Raises:
        agents_trio.APIError: The plugin refused the text (raised at the next chunk sent, or
            when the text ends).
        Exception: Whatever iterating ``text`` raised.

    Cancellation: owns the pump handing the text over; text the plugin has not taken yet is
    dropped.
    """

    async def push(batch: list[str | None]) -> None:  # asyncio-flavoured; None: the end
        for chunk in batch:
            if chunk is None:
                stream.end_input()
            else:
                stream.push_text(chunk)

    async with bridge.open_send_channel(push, max_buffer_size=_TEXT_BUFFER,
                                        map_error=error_mapper(label)) as pushed:
        async for chunk in text:
            if chunk:
                await pushed.send(chunk)
        await pushed.send(None)
        await pushed.aclose()


# Text chunks sent ahead of the plugin taking them (it takes every batch in one loop turn).
_TEXT_BUFFER = 64


class _FrameStream:
    """The synthesized frames of the segment."""

    def __init__(self, audio: BridgeReceiveChannel[lk_tts.SynthesizedAudio]) -> None:
        self._audio = audio

    def __aiter__(self) -> _FrameStream:
        return self

    async def __anext__(self) -> rtc.AudioFrame:
        try:
            return (await self._audio.receive()).frame
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
