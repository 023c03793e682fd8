"""Trio-native model protocols: LLM, STT, TTS, VAD, and the values their streams carry.

A model is any object with the described methods; nothing here is a base class you must
inherit. Streams are async context managers so that a model owning background work can keep
it inside the ``async with`` (the caller's task), and leaving the block stops that work.

CPU-heavy work (inference, decoding) must not run on the Trio loop: every session of the
process shares it, and a model that holds it for 50 ms delays every other session's audio by
as much. Run such work in a worker thread when it releases the GIL, else in a subprocess;
``agents_trio.blocking.open_blocking_worker`` does either with bounded queues both ways.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, Union, runtime_checkable

import msgspec
from livekit import rtc

from ._ids import now
from .chat import ChatContext

ToolChoice = Union[Literal["auto", "required", "none"], dict[str, Any]]


class FunctionToolCall(msgspec.Struct, kw_only=True):
    """A tool call streamed by an LLM; ``arguments`` is a JSON string."""

    name: str
    arguments: str = "{}"
    call_id: str = ""
    type: Literal["function"] = "function"
    extra: dict[str, Any] | None = None  # provider data (e.g. thought signatures)


class CompletionUsage(msgspec.Struct, kw_only=True):
    completion_tokens: int = 0
    prompt_tokens: int = 0
    total_tokens: int = 0
    prompt_cached_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0  # part of completion_tokens


class ChoiceDelta(msgspec.Struct, kw_only=True):
    """LiveKit's ``ChoiceDelta``: what one chunk adds to the reply (its text and tool calls;
    ``extra``: provider data such as thought signatures)."""

    role: Literal["developer", "system", "user", "assistant"] | None = None
    content: str | None = None
    tool_calls: list[FunctionToolCall] = msgspec.field(default_factory=list)
    extra: dict[str, Any] | None = None


class ChatChunk(msgspec.Struct, kw_only=True):
    """One piece of an LLM stream: a text delta and/or tool calls.

    Built either way: ``ChatChunk(content=..., tool_calls=...)``, or LiveKit's
    ``ChatChunk(id=..., delta=ChoiceDelta(content=..., tool_calls=...))``. Either way both are
    filled (``delta`` is None on a chunk with neither, as a usage-only chunk in LiveKit), and
    ``delta`` is what the reply is read from: change ``chunk.delta.content`` to change it.

    Raises:
        ValueError: Both ``delta`` and ``content``/``tool_calls`` given, and they differ.
    """

    id: str = ""
    content: str | None = None
    tool_calls: list[FunctionToolCall] = msgspec.field(default_factory=list)
    usage: CompletionUsage | None = None
    delta: ChoiceDelta | None = None

    def __post_init__(self) -> None:
        if self.delta is not None:
            given = (self.content, self.tool_calls)
            if given != (None, []) and given != (self.delta.content, self.delta.tool_calls):
                raise ValueError("ChatChunk takes delta= (LiveKit's form) or content=/"
                                 "tool_calls=, not both (unless they agree)")
            self.content, self.tool_calls = self.delta.content, self.delta.tool_calls
        elif self.content is not None or self.tool_calls:
            self.delta = ChoiceDelta(role="assistant", content=self.content,
                                     tool_calls=self.tool_calls)

    def has_response(self) -> bool:
        """Whether the chunk carries reply text or tool calls (not only usage or metadata)."""
        return bool(self.delta and (self.delta.content or self.delta.tool_calls))


class FlushSentinel(msgspec.Struct):
    """Yielded by ``llm_node`` to end a segment: the text so far is synthesized on its own."""


class LLMStream(Protocol):
    def __aiter__(self) -> AsyncIterator[ChatChunk]: ...


@runtime_checkable
class LLM(Protocol):
    """A chat model. ``chat`` returns an async context manager yielding a stream of chunks."""

    def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
             tool_choice: ToolChoice | None = None
             ) -> AbstractAsyncContextManager[AsyncIterable[ChatChunk]]: ...


class SpeechEventType(str, enum.Enum):
    START_OF_SPEECH = "start_of_speech"
    INTERIM_TRANSCRIPT = "interim_transcript"
    PREFLIGHT_TRANSCRIPT = "preflight_transcript"
    FINAL_TRANSCRIPT = "final_transcript"
    RECOGNITION_USAGE = "recognition_usage"  # billing: no text; the session ignores it
    END_OF_SPEECH = "end_of_speech"


class TimedString(str):
    """Text with its timing, as LiveKit's ``TimedString``: a word or sentence an STT or TTS
    placed in time (seconds; None where the model did not say)."""

    start_time: float | None
    end_time: float | None
    confidence: float | None
    start_time_offset: float | None
    speaker_id: str | None

    def __new__(cls, text: str, start_time: float | None = None, end_time: float | None = None,
                confidence: float | None = None, start_time_offset: float | None = None,
                speaker_id: str | None = None) -> TimedString:
        obj = super().__new__(cls, text)
        obj.start_time = start_time
        obj.end_time = end_time
        obj.confidence = confidence
        obj.start_time_offset = start_time_offset
        obj.speaker_id = speaker_id
        return obj


class RecognitionUsage(msgspec.Struct, kw_only=True):
    """What a recognition consumed (LiveKit's ``RecognitionUsage``): ``audio_duration`` is the
    audio billed since the previous usage event, in seconds."""

    audio_duration: float
    input_tokens: int = 0
    output_tokens: int = 0


class SpeechData(msgspec.Struct, kw_only=True, gc=False):
    """One transcript alternative, with LiveKit's ``SpeechData`` fields (the translation and
    diarization ones are None unless the STT fills them)."""

    text: str
    confidence: float = 1.0
    language: str = ""
    start_time: float = 0.0
    end_time: float = 0.0
    speaker_id: str | None = None
    is_primary_speaker: bool | None = None
    words: list[TimedString] | None = None
    source_languages: list[str] | None = None
    source_texts: list[str] | None = None
    target_languages: list[str] | None = None
    target_texts: list[str] | None = None
    metadata: dict[str, Any] | None = None


class SpeechEvent(msgspec.Struct, kw_only=True, gc=False):
    """A speech-to-text event. ``created_at`` is Trio time here (LiveKit: wall clock);
    ``speech_start_time``/``speech_end_time`` are what the provider reported, if anything."""

    type: SpeechEventType
    alternatives: list[SpeechData] = msgspec.field(default_factory=list)
    request_id: str = ""
    recognition_usage: RecognitionUsage | None = None
    speech_start_time: float | None = None
    created_at: float = msgspec.field(default_factory=now)
    speech_end_time: float | None = None


class STTStream(Protocol):
    """Frames in (``push_frame``, a non-blocking call), speech events out (async iteration)."""

    def push_frame(self, frame: rtc.AudioFrame) -> None: ...
    def end_input(self) -> None: ...
    def __aiter__(self) -> AsyncIterator[SpeechEvent]: ...


@runtime_checkable
class STT(Protocol):
    def stream(self) -> AbstractAsyncContextManager[STTStream]: ...


# VADEvent, SpeechEvent and SpeechData are made per audio frame and never form reference
# cycles, so they are kept out of the cyclic garbage collector (gc=False): fewer and shorter
# collections with hundreds of sessions in one process.


class VADEventType(str, enum.Enum):
    START_OF_SPEECH = "start_of_speech"
    INFERENCE_DONE = "inference_done"
    END_OF_SPEECH = "end_of_speech"


class VADEvent(msgspec.Struct, kw_only=True, gc=False):
    """A voice-activity event; durations are seconds."""

    type: VADEventType
    speech_duration: float = 0.0
    silence_duration: float = 0.0
    inference_duration: float = 0.0
    speaking: bool = False
    probability: float = 0.0
    timestamp: float = 0.0
    samples_index: int = 0
    frames: list[rtc.AudioFrame] = []  # LiveKit's: the frames the event is about, if kept
    # the VAD's raw counts, without its hysteresis (an audio turn detector needs them)
    raw_accumulated_silence: float = 0.0
    raw_accumulated_speech: float = 0.0


class VADStream(Protocol):
    """Frames in (``push_frame``), voice-activity events out (async iteration).

    A VAD whose inference runs inside ``push_frame`` (a cheap one: see the module doc) may
    return the frame's events from it (a sequence, in order) instead of None: the session
    handles them at once in the pushing task, with no task switch per frame. Events produced
    later, by inference running elsewhere, come through iteration.
    """

    def push_frame(self, frame: rtc.AudioFrame) -> Sequence[VADEvent] | None: ...
    def end_input(self) -> None: ...
    def __aiter__(self) -> AsyncIterator[VADEvent]: ...


@runtime_checkable
class VAD(Protocol):
    def stream(self) -> AbstractAsyncContextManager[VADStream]: ...


@runtime_checkable
class TTS(Protocol):
    """Text to speech. ``stream(text)`` synthesizes one segment: it reads ``text`` until it ends
    and yields the audio frames (``rtc.AudioFrame``)."""

    sample_rate: int
    num_channels: int

    def stream(self, text: AsyncIterable[str]
               ) -> AbstractAsyncContextManager[AsyncIterable[rtc.AudioFrame]]: ...


@runtime_checkable
class TurnDetector(Protocol):
    """An end-of-turn model (LiveKit's ``_TurnDetector`` protocol), given as
    ``turn_handling={"turn_detection": detector}``. When its end-of-turn probability for the
    conversation so far is below ``unlikely_threshold``, the turn waits for
    ``endpointing.max_delay`` instead of ``min_delay``. Its methods are Trio async functions.

    Cancellation: a prediction is cancelled when the user speaks again or the session closes;
    the methods must be safe to cancel at any checkpoint.
    """

    async def unlikely_threshold(self, language: str | None) -> float | None:
        """The probability below which the end of turn is unlikely (None: no opinion).

        Cancellation: the runtime cancels it with the prediction it belongs to (see
        :meth:`predict_end_of_turn`); it must let ``trio.Cancelled`` through and keep no
        state from the call.
        """
        ...

    async def supports_language(self, language: str | None) -> bool:
        """Whether the model predicts for ``language``.

        Cancellation: as :meth:`unlikely_threshold`; the runtime asks again next turn.
        """
        ...

    async def predict_end_of_turn(self, chat_ctx: ChatContext, *,
                                  timeout: float | None = None) -> float:
        """The probability that the user has finished their turn, given ``chat_ctx``.

        Cancellation: the runtime cancels it when the user speaks again (a new prediction
        replaces it) or the session closes; it must stop its inference or leave it to
        finish harmlessly, and the next call must work.
        """
        ...


class ModelSettings(msgspec.Struct, kw_only=True):
    """Per-call settings passed to the agent's nodes."""

    tool_choice: ToolChoice | None = None
