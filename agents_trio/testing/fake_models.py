"""Fake VAD, STT, LLM and TTS that follow a FakeActions script in Trio time."""

from __future__ import annotations

import math
import operator
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from livekit import rtc

from ..chat import ChatContext, ChatItem, ChatMessage, FunctionCallOutput
from ..models import (ChatChunk, SpeechData, ToolChoice, SpeechEvent, SpeechEventType, VADEvent,
                      VADEventType)
from .actions import FakeActions, FakeLLMResponse, FakeTTSResponse, FakeUserSpeech


class _ScriptedStream:
    """Frames in; events out on the script's clock, which starts at the first pushed frame."""

    def __init__(self) -> None:
        self._first_frame = trio.Event()
        self._send, self._recv = trio.open_memory_channel[Any](math.inf)
        self.origin: float | None = None

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        if self.origin is None:
            self.origin = trio.current_time()
            self._first_frame.set()

    def end_input(self) -> None:
        pass

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._recv.__aiter__()

    async def play(self, timeline: list[tuple[float, Any]], done: trio.Event) -> None:
        await self._first_frame.wait()
        assert self.origin is not None
        async with self._send:
            for at, event in sorted(timeline, key=lambda p: p[0]):
                await trio.sleep_until(self.origin + at)
                self._send.send_nowait(event)
            done.set()  # before the channel closes: its reader may close the stream at once


class FakeVAD:
    """Voice activity from the script: start after ``min_speech``, an inference every
    ``min_speech``, end ``min_silence`` after the speech ends."""

    def __init__(self, speeches: list[FakeUserSpeech], *, min_silence_duration: float = 0.5,
                 min_speech_duration: float = 0.05) -> None:
        self.speeches = speeches
        self.min_silence = min_silence_duration
        self.min_speech = min_speech_duration
        self.speeches_done = trio.Event()

    def timeline(self) -> list[tuple[float, VADEvent]]:
        out: list[tuple[float, VADEvent]] = []
        for s in self.speeches:
            eos = s.end + self.min_silence
            out.append((s.start + self.min_speech, VADEvent(
                type=VADEventType.START_OF_SPEECH, speech_duration=self.min_speech,
                speaking=True)))
            k = 2
            while (t := s.start + k * self.min_speech) < eos - 0.1:
                out.append((t, VADEvent(type=VADEventType.INFERENCE_DONE,
                                        speech_duration=min(t, s.end) - s.start,
                                        silence_duration=max(0.0, t - s.end),
                                        raw_accumulated_speech=(self.min_speech if t <= s.end
                                                                else 0.0),
                                        raw_accumulated_silence=max(0.0, t - s.end))))
                k += 1
            out.append((eos, VADEvent(type=VADEventType.END_OF_SPEECH,
                                      speech_duration=s.end - s.start,
                                      silence_duration=self.min_silence)))
        return out

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[_ScriptedStream]:
        """A stream playing the script's events from its first pushed frame.

        Cancellation: leaving the block, cancelled or not, stops the script.
        """
        stream = _ScriptedStream()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.play, self.timeline(), self.speeches_done)
            yield stream
            nursery.cancel_scope.cancel()


class FakeSTT:
    """Transcripts from the script: an interim (first two words) at ``end + stt_delay/2``,
    the final at ``end + stt_delay``."""

    def __init__(self, speeches: list[FakeUserSpeech]) -> None:
        self.speeches = speeches
        self.speeches_done = trio.Event()

    def timeline(self) -> list[tuple[float, SpeechEvent]]:
        out: list[tuple[float, SpeechEvent]] = []
        for s in self.speeches:
            if not s.transcript:
                continue
            interim = " ".join(s.transcript.split()[:2])
            out.append((s.start, SpeechEvent(type=SpeechEventType.START_OF_SPEECH)))
            out.append((s.end + s.stt_delay / 2, SpeechEvent(
                type=SpeechEventType.INTERIM_TRANSCRIPT,
                alternatives=[SpeechData(text=interim)])))
            if s.final:
                out.append((s.end + s.stt_delay, SpeechEvent(
                    type=SpeechEventType.FINAL_TRANSCRIPT,
                    alternatives=[SpeechData(text=s.transcript)])))
            out.append((s.end + s.stt_delay, SpeechEvent(type=SpeechEventType.END_OF_SPEECH)))
        return out

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[_ScriptedStream]:
        """A stream playing the script's events from its first pushed frame.

        Cancellation: leaving the block, cancelled or not, stops the script.
        """
        stream = _ScriptedStream()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.play, self.timeline(), self.speeches_done)
            yield stream
            nursery.cancel_scope.cancel()


def _last_item_text(chat_ctx: ChatContext) -> str:
    if not chat_ctx.items:
        return ""
    item = chat_ctx.items[-1]
    if isinstance(item, ChatMessage):
        return item.text_content or ""
    if isinstance(item, FunctionCallOutput):
        return item.output
    return ""


class RecordedChatContext:
    """The items one recorded request had, sharing storage with the request before it.

    A conversation's requests mostly repeat the previous request plus a few new items, so
    each record keeps how many leading items it shares with its predecessor and its own
    tail; :attr:`items` is rebuilt on access. Recording costs memory for the new items only
    (a full copy per request grows quadratically with the conversation).
    """

    __slots__ = ("_base", "_shared", "_tail")

    def __init__(self, base: RecordedChatContext | None, shared: int,
                 tail: tuple[ChatItem, ...]) -> None:
        self._base = base
        self._shared = shared
        self._tail = tail

    @property
    def items(self) -> list[ChatItem]:
        """A new list of the request's items (changing it changes nothing recorded)."""
        chain: list[RecordedChatContext] = [self]
        base = self.based_on
        while base is not None:
            chain.append(base)
            base = base.based_on
        items: list[ChatItem] = []
        for record in reversed(chain):
            record.apply(items)
        return items

    @property
    def based_on(self) -> RecordedChatContext | None:
        """The earlier request whose first items this one shares, if it shares any."""
        return self._base if self._shared else None

    def apply(self, items: list[ChatItem]) -> None:
        """Turn ``items`` (the request :attr:`based_on`'s items) into this one's, in place."""
        del items[self._shared:]
        items.extend(self._tail)


class _RequestRecorder:
    """Builds :class:`RecordedChatContext` records; keeps the last request's item list (one
    list, not one per request) to find what the next request shares with it."""

    def __init__(self) -> None:
        self._last: RecordedChatContext | None = None
        self._last_items: list[ChatItem] = []

    def record(self, chat_ctx: ChatContext) -> RecordedChatContext:
        items = list(chat_ctx.items)
        shared = _shared_prefix(self._last_items, items)
        record = RecordedChatContext(self._last, shared, tuple(items[shared:]))
        self._last, self._last_items = record, items
        return record


def _shared_prefix(old: list[Any], new: list[Any]) -> int:
    """How many leading items ``new`` shares (by identity) with ``old``."""
    n = min(len(old), len(new))
    if n and old[n - 1] is new[n - 1] and all(map(operator.is_, old[:n], new[:n])):
        return n   # the usual case: the old request is a prefix of the new one
    for i in range(n):
        if old[i] is not new[i]:
            return i
    return n


class FakeLLM:
    """Answers by the text of the last chat item; unknown input gives an empty stream.

    ``calls`` records every request for assertions: ``{"chat_ctx": RecordedChatContext,
    "tools": [...], "tool_choice": ...}``; ``call["chat_ctx"].items`` are the items the
    request had (recorded cheaply, see :class:`RecordedChatContext`).
    """

    def __init__(self, responses: list[FakeLLMResponse] | None = None) -> None:
        self.responses = list(responses or [])
        self.calls: list[dict[str, Any]] = []
        self._recorder = _RequestRecorder()

    def _find(self, key: str) -> FakeLLMResponse | None:
        for r in self.responses:
            if r.input == key:
                return r
        return None

    async def __aenter__(self) -> FakeLLM:
        """``async with FakeLLM(...) as llm:``, as a LiveKit LLM is used (nothing to open).

        Cancellation: not a checkpoint; nothing to cancel.
        """
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Nothing to close.

        Cancellation: not a checkpoint; nothing to cancel.
        """

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
                   tool_choice: ToolChoice | None = None
                   ) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        """The response scripted for the last item's text (recorded in ``calls``).

        Cancellation: cancelling the reader stops the stream where it is.
        """
        self.calls.append({"chat_ctx": self._recorder.record(chat_ctx),
                           "tools": list(tools or []),
                           "tool_choice": tool_choice})
        yield self._stream(self._find(_last_item_text(chat_ctx)), tool_choice)

    async def _stream(self, resp: FakeLLMResponse | None, tool_choice: ToolChoice | None
                      ) -> AsyncIterator[ChatChunk]:
        if resp is None:
            return
        started = trio.current_time()
        await trio.sleep(resp.ttft)
        if resp.error is not None:
            raise resp.error
        for i in range(0, len(resp.content), 3):
            yield ChatChunk(content=resp.content[i:i + 3])
        await trio.sleep_until(started + resp.duration)
        if resp.tool_calls and tool_choice != "none":
            yield ChatChunk(tool_calls=list(resp.tool_calls))


class FakeTTS:
    """Synthesizes silence for known texts: ``ttfb`` after the text ends, 10 ms frames for
    ``audio_duration``, done ``duration`` after the text ended. Unknown text gives no audio."""

    sample_rate = 24000
    num_channels = 1

    def __init__(self, responses: list[FakeTTSResponse] | None = None) -> None:
        self.responses = list(responses or [])
        self.inputs: list[str] = []
        self._silence = bytes(2 * self.sample_rate // 100)

    def _find(self, text: str) -> FakeTTSResponse | None:
        for r in self.responses:
            if r.input.strip() == text.strip():
                return r
        return None

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]
                     ) -> AsyncIterator[AsyncIterator[rtc.AudioFrame]]:
        """The audio scripted for the whole ``text`` (recorded in ``inputs``).

        Cancellation: cancelling the reader stops the stream where it is.
        """
        yield self._synthesize(text)

    async def _synthesize(self, text: AsyncIterable[str]) -> AsyncIterator[rtc.AudioFrame]:
        parts = [t async for t in text]
        full = "".join(parts)
        self.inputs.append(full)
        resp = self._find(full)
        if resp is None:
            return
        started = trio.current_time()
        await trio.sleep(resp.ttfb)
        if resp.error is not None:
            raise resp.error
        samples = self.sample_rate // 100
        for _ in range(int(round(resp.audio_duration * 100))):
            yield rtc.AudioFrame(self._silence, self.sample_rate, 1, samples)
        await trio.sleep_until(started + resp.duration)


def fakes_for(actions: FakeActions) -> tuple[FakeVAD, FakeSTT, FakeLLM, FakeTTS]:
    return (FakeVAD(actions.user_speeches), FakeSTT(actions.user_speeches),
            FakeLLM(actions.llm_responses), FakeTTS(actions.tts_responses))
