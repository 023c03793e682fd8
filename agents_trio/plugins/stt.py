"""A LiveKit Agents ``stt.STT`` as a Trio ``STT``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Generic, TypeVar

import trio
from livekit import rtc
from livekit.agents import NOT_GIVEN, APIConnectOptions, NotGivenOr
from livekit.agents import stt as lk_stt
from livekit.agents import vad as lk_vad

from livekit.agents import voice as lk_voice

from ..chat import ChatMessage
from ..events import ConversationItemAddedEvent
from ..io.bridge import AsyncioBridge, BridgeFeeder, BridgeReceiveChannel
from ..io.bridge_on_demand import open_bridge_or_none
from ..models import SpeechData, SpeechEvent, SpeechEventType, TimedString
from ._convert import to_lk_chat_message
from ._common import (
    aclose_plugin_stream,
    connect_options,
    error_mapper,
    resolve_bridge,
    to_api_error,
)

# recognition_usage is billing, not speech: the plugin's own metrics report it
_SPEECH_TYPES = {t.value: t for t in SpeechEventType
                 if t is not SpeechEventType.RECOGNITION_USAGE}

E = TypeVar("E")


class STTAdapter:
    """Wraps a LiveKit Agents STT (``deepgram.STT()``, ``openai.STT()``, …) for agents_trio.

    ``stream()`` opens the plugin's recognition stream on the asyncio bridge. Frames pushed
    from Trio reach it in order, batched (one loop callback carries every frame pushed since
    the last one ran); its events come back as :class:`agents_trio.SpeechEvent`. A plugin
    that cannot stream is wrapped in LiveKit's ``stt.StreamAdapter`` with the given ``vad``.

    Args:
        stt: The LiveKit Agents STT.
        vad: A LiveKit VAD, required for a non-streaming STT (it segments the audio).
        language: Passed to ``stt.stream(language=...)``.
        bridge: The bridge to run it on (default: the current bridge at each call).
        conn_options: Retries and timeouts for the plugin.
    """

    #: where a session or agent takes it (``stt=``)
    model_kind: ClassVar[str] = "stt"

    def __init__(self, stt: lk_stt.STT[Any], *, vad: lk_vad.VAD | None = None,
                 language: NotGivenOr[str] = NOT_GIVEN, bridge: AsyncioBridge | None = None,
                 conn_options: APIConnectOptions | None = None) -> None:
        if not isinstance(stt, lk_stt.STT):
            raise TypeError(f"STTAdapter wraps a livekit.agents.stt.STT, got {stt!r}")
        if not stt.capabilities.streaming:
            if vad is None:
                raise ValueError(f"{stt.label} does not stream: pass a VAD to segment the audio "
                                 "(STTAdapter(stt, vad=silero.VAD.load()))")
            stt = lk_stt.StreamAdapter(stt=stt, vad=vad)
        self.stt = stt
        self._language = language
        self._bridge = bridge
        self._conn_options = conn_options

    @property
    def label(self) -> str:
        return self.stt.label

    @property
    def capabilities(self) -> lk_stt.STTCapabilities:
        """The plugin's own (``keyterms`` and ``chat_context`` decide what the session's STT
        context gives it)."""
        return self.stt.capabilities

    def update_session_keyterms(self, keyterms: list[str]) -> None:
        """Hand the session's keyterms to the plugin through LiveKit's framework hook (its
        ``_update_session_keyterms``, which LiveKit's session calls), in the asyncio loop."""
        # LiveKit's hook for the framework: private by name, public to sessions by contract
        self._on_loop(self.stt._update_session_keyterms, list(keyterms))  # noqa: SLF001

    def push_conversation_item(self, event: ConversationItemAddedEvent) -> None:
        """Hand a conversation turn to the plugin through LiveKit's framework hook (its
        ``_push_conversation_item``), as LiveKit's event with the item converted."""
        if not isinstance(event.item, ChatMessage):
            return  # LiveKit's plugins read messages only
        lk_event = lk_voice.ConversationItemAddedEvent(item=to_lk_chat_message(event.item))
        self._on_loop(self.stt._push_conversation_item, lk_event)  # noqa: SLF001

    def _on_loop(self, fn: Callable[[Any], object], arg: object) -> None:
        bridge = open_bridge_or_none(self._bridge)
        if bridge is None:
            fn(arg)  # no loop open yet: no plugin stream either, the plugin only stores it
            return
        bridge.call_soon(fn, arg)

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[RecognitionStream[SpeechEvent]]:
        """A recognition stream (see the class docstring).

        Cancellation:
            Owns the plugin stream; leaving the block closes it (shielded, bounded).
        """
        bridge = await resolve_bridge(self._bridge)
        kwargs = connect_options(self._conn_options)
        if self._language is not NOT_GIVEN:
            kwargs["language"] = self._language
        try:
            stream = await bridge.run_sync(self.stt.stream, **kwargs)
        except Exception as e:
            raise to_api_error(e, self.label) from e
        async with open_recognition_stream(bridge, stream, self.label,
                                           from_lk_speech_event) as recognition:
            yield recognition

    def __repr__(self) -> str:
        return f"STTAdapter({self.stt!r})"


class RecognizingSTTAdapter:
    """A LiveKit STT's whole-recording ``recognize`` as a Trio
    :class:`agents_trio.stt_stream_adapter.RecognizingSTT`.

    A session given a non-streaming LiveKit STT and a Trio VAD (``agents_trio.offline.
    SileroVAD``, say) segments the audio with that VAD in ``agents_trio.stt.StreamAdapter``,
    around this: LiveKit's own ``stt.StreamAdapter`` takes LiveKit VADs only.

    Args:
        stt: The LiveKit Agents STT.
        bridge: The bridge to run it on (default: the current bridge at each call).
        conn_options: Retries and timeouts for the plugin.
    """

    model_kind: ClassVar[str] = "stt"

    def __init__(self, stt: lk_stt.STT[Any], *, bridge: AsyncioBridge | None = None,
                 conn_options: APIConnectOptions | None = None) -> None:
        if not isinstance(stt, lk_stt.STT):
            raise TypeError(f"RecognizingSTTAdapter wraps a livekit.agents.stt.STT, got {stt!r}")
        self.stt = stt
        self._bridge = bridge
        self._conn_options = conn_options

    @property
    def label(self) -> str:
        return self.stt.label

    @property
    def capabilities(self) -> lk_stt.STTCapabilities:
        return self.stt.capabilities

    async def recognize(self, buffer: rtc.AudioFrame | list[rtc.AudioFrame], *,
                        language: str | None = None) -> SpeechEvent:
        """The plugin's transcript of ``buffer`` (a ``FINAL_TRANSCRIPT`` event).

        Raises:
            APIError: the plugin failed.

        Cancellation: a checkpoint; cancelling cancels the plugin's call on the bridge.
        """
        bridge = await resolve_bridge(self._bridge)
        kwargs = connect_options(self._conn_options)
        if language:
            kwargs["language"] = language
        try:
            event = await bridge.run(self.stt.recognize, buffer, **kwargs)
        except Exception as e:
            raise to_api_error(e, self.label) from e
        converted = from_lk_speech_event(event)
        if converted is None or converted.type is not SpeechEventType.FINAL_TRANSCRIPT:
            return SpeechEvent(type=SpeechEventType.FINAL_TRANSCRIPT)
        return converted

    def __repr__(self) -> str:
        return f"RecognizingSTTAdapter({self.stt!r})"


def from_lk_speech_event(ev: lk_stt.SpeechEvent) -> SpeechEvent | None:
    kind = _SPEECH_TYPES.get(getattr(ev.type, "value", ev.type))
    if kind is None:  # e.g. recognition_usage: metrics, not speech
        return None
    return SpeechEvent(
        type=kind, request_id=ev.request_id, speech_start_time=ev.speech_start_time,
        speech_end_time=ev.speech_end_time,
        alternatives=[_from_lk_speech_data(alt) for alt in ev.alternatives])


def _from_lk_speech_data(alt: lk_stt.SpeechData) -> SpeechData:
    words = None if alt.words is None else [
        TimedString(str(w), start_time=_given(getattr(w, "start_time", None)),
                    end_time=_given(getattr(w, "end_time", None)),
                    confidence=_given(getattr(w, "confidence", None)),
                    start_time_offset=_given(getattr(w, "start_time_offset", None)),
                    speaker_id=getattr(w, "speaker_id", None))
        for w in alt.words]
    return SpeechData(
        text=alt.text, confidence=alt.confidence, language=str(alt.language or ""),
        start_time=alt.start_time, end_time=alt.end_time, speaker_id=alt.speaker_id,
        is_primary_speaker=alt.is_primary_speaker, words=words,
        source_languages=_strs(alt.source_languages), source_texts=alt.source_texts,
        target_languages=_strs(alt.target_languages), target_texts=alt.target_texts,
        metadata=alt.metadata)


def _given(value: object) -> float | None:
    """LiveKit's NOT_GIVEN (or anything not a number) as None."""
    return float(value) if isinstance(value, (int, float)) else None


def _strs(values: list[Any] | None) -> list[str] | None:
    return None if values is None else [str(v) for v in values]


class RecognitionStream(Generic[E]):
    """Frames in (``push_frame``, sync), converted events out (``async for``)."""

    def __init__(self, frames: BridgeFeeder[rtc.AudioFrame], end_input: Callable[[], object],
                 events: BridgeReceiveChannel[Any], convert: Callable[[Any], E | None]
                 ) -> None:
        self._frames = frames
        self._end_input = end_input
        self._events = events
        self._convert = convert
        self._ended = False

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Queue ``frame`` for the plugin. Never blocks or raises: once the plugin stream
        failed, frames are dropped and the failure is raised by the iteration."""
        if not self._ended:
            self._frames.feed(frame)

    def end_input(self) -> None:
        """No more frames: the plugin flushes and finishes its events."""
        if not self._ended:
            self._ended = True
            self._frames.call(self._end_input)

    def __aiter__(self) -> RecognitionStream[E]:
        return self

    async def __anext__(self) -> E:
        while True:
            try:
                event = self._convert(await self._events.receive())
            except trio.EndOfChannel:
                raise StopAsyncIteration from None
            if event is not None:
                return event


@asynccontextmanager
async def open_recognition_stream(bridge: AsyncioBridge,
                                  stream: lk_stt.RecognizeStream | lk_vad.VADStream,
                                  label: str, convert: Callable[[Any], E | None]
                                  ) -> AsyncIterator[RecognitionStream[E]]:
    """Serve an opened plugin stream (STT or VAD) as a :class:`RecognitionStream`.

    Cancellation: owns the event pump; leaving the block (by a cancellation too) stops it,
    drops the events not yet received, and closes the plugin stream (shielded, bounded).
    """
    try:
        async with bridge.open_receive_channel(stream, max_buffer_size=256,
                                               map_error=error_mapper(label)) as events:
            yield RecognitionStream(bridge.feeder(stream.push_frame), stream.end_input,
                                    events, convert)
    finally:
        await aclose_plugin_stream(bridge, stream, label)
