"""The fallback adapters when their caller is cancelled (a barge-in, the close) while a model
answers.

A model on the asyncio bridge reports its cancelled request as its own error (the bridge
raises "the task's own error if it failed while unwinding"). The adapters took that error for
a fault of the model: they marked it unavailable (an availability event), tried the next
model while the caller was being cancelled (a request the caller never reads), started a
recovery probe (the request again, after the caller was gone), and with the last model the
caller got "all LLMs failed" in place of its own cancellation. The error that reaches a
cancelled caller is now the echo of the cancellation: nothing is marked, tried or probed, and
the cancellation goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from livekit import rtc

from agents_trio import APIConnectionError, ChatContext
from agents_trio import llm as llm_mod
from agents_trio import stt as stt_mod
from agents_trio import tts as tts_mod
from agents_trio.stt import SpeechData, SpeechEvent, SpeechEventType


async def _reset_when_cancelled(delay: float) -> None:
    """Wait ``delay``; a cancellation comes out as a reset connection (as from the bridge)."""
    try:
        await trio.sleep(delay)
    except trio.Cancelled:
        raise APIConnectionError("connection reset") from None


class SlowLLM:
    """Its first chunk comes after 1 s; ``resets``: a cancellation reaches it as an error."""

    def __init__(self, label: str, *, resets: bool) -> None:
        self.label, self.resets = label, resets
        self.requests = 0

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
                   tool_choice: object = None) -> AsyncIterator[AsyncIterator[llm_mod.ChatChunk]]:
        self.requests += 1
        yield self._stream()

    async def _stream(self) -> AsyncIterator[llm_mod.ChatChunk]:
        for i in range(3):
            if self.resets:
                await _reset_when_cancelled(1.0)
            else:
                await trio.sleep(1.0)
            yield llm_mod.ChatChunk(content=f"{self.label}:{i} ")


class SlowTTS:
    """One 10 ms frame per text part, each after 1 s; ``resets`` as for ``SlowLLM``."""

    sample_rate = 24000
    num_channels = 1

    def __init__(self, label: str, *, resets: bool) -> None:
        self.label, self.resets = label, resets
        self.requests = 0

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]
                     ) -> AsyncIterator[AsyncIterator[rtc.AudioFrame]]:
        self.requests += 1
        yield self._frames(text)

    async def _frames(self, text: AsyncIterable[str]) -> AsyncIterator[rtc.AudioFrame]:
        async for _ in text:
            if self.resets:
                await _reset_when_cancelled(1.0)
            else:
                await trio.sleep(1.0)
            yield rtc.AudioFrame(b"\0\0" * 240, self.sample_rate, 1, 240)


class _SlowSTTStream:
    def __init__(self, resets: bool) -> None:
        self.resets = resets

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        pass

    def end_input(self) -> None:
        pass

    async def __aiter__(self) -> AsyncIterator[SpeechEvent]:
        while True:
            if self.resets:
                await _reset_when_cancelled(1.0)
            else:
                await trio.sleep(1.0)
            yield SpeechEvent(type=SpeechEventType.FINAL_TRANSCRIPT,
                              alternatives=[SpeechData(text="hello")])


class SlowSTT:
    """A final transcript every second; ``resets`` as for ``SlowLLM``."""

    def __init__(self, label: str, *, resets: bool) -> None:
        self.label, self.resets = label, resets
        self.requests = 0

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[_SlowSTTStream]:
        self.requests += 1
        yield _SlowSTTStream(self.resets)


async def _ask_llm(adapter: llm_mod.FallbackAdapter) -> None:
    async with adapter.chat(chat_ctx=ChatContext()) as stream:
        async for _ in stream:
            pass


async def _speak(adapter: tts_mod.FallbackAdapter) -> None:
    async def text() -> AsyncIterator[str]:
        for part in ("Hello ", "there, ", "friend."):
            yield part

    async with adapter.stream(text()) as frames:
        async for _ in frames:
            pass


async def _listen(adapter: stt_mod.FallbackAdapter) -> None:
    async with adapter.stream() as stream:
        async for _ in stream:
            pass


_KINDS = {
    "llm": (SlowLLM, llm_mod.FallbackAdapter, _ask_llm, "llm_availability_changed"),
    "tts": (SlowTTS, tts_mod.FallbackAdapter, _speak, "tts_availability_changed"),
    "stt": (SlowSTT, stt_mod.FallbackAdapter, _listen, "stt_availability_changed"),
}


@pytest.mark.parametrize("kind", sorted(_KINDS))
@pytest.mark.parametrize("models", [1, 2])
@pytest.mark.parametrize("cancel_at", [0.5, 1.5])  # before its first output, and after
async def test_a_cancelled_caller_is_cancelled_and_no_model_counts_as_failed(
        kind: str, models: int, cancel_at: float, autojump_clock: object) -> None:
    model_type, adapter_type, use, event = _KINDS[kind]
    first, backup = model_type("first", resets=True), model_type("backup", resets=False)
    availability: list[object] = []
    caller_saw: list[BaseException] = []
    async with adapter_type([first, backup][:models]) as adapter:
        adapter.on(event, availability.append)
        with trio.move_on_after(cancel_at) as barge_in:
            try:
                await use(adapter)
            except Exception as e:
                caller_saw.append(e)
        await trio.sleep(5.0)   # a probe would ask the first model again meanwhile
        assert adapter.available(first)
    assert caller_saw == []
    assert barge_in.cancelled_caught   # the caller got its own cancellation
    assert availability == []
    assert (first.requests, backup.requests) == (1, 0)
