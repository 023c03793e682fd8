"""The Trio-native realtime (speech-to-speech) model protocol.

A ``RealtimeModel`` opens sessions: ``async with model.session() as rt:``. The session is a
long-lived connection; leaving the block closes it, and every call after that is an error. The
activity opens its session inside its own nursery, so a session can never outlive the activity
that uses it.

Calls go to the server (``push_audio``, ``generate_reply``, ``interrupt``, ``truncate``,
``update_*``); server events come back through ``async for ev in rt.events()`` — one consumer,
the activity. A generation carries its messages and function calls as Trio receive channels.
When a response is done the session may yield its ``RealtimeModelMetrics`` (LiveKit's record:
tokens, ``ttft``, ``duration``); the session reports it as ``metrics_collected`` and counts
it in the usage, filling ``label`` and ``metadata`` from the model when they are empty.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, Union, runtime_checkable

import msgspec
import trio
from livekit import rtc
from typing_extensions import TypeIs

from ._errors import AgentsTrioError, APIError
from .chat import ChatContext, FunctionCall
from .events import RealtimeModelMetrics
from .models import ToolChoice


DEFAULT_RESPONSE_STALL_TIMEOUT = 15.0
"""Seconds a realtime response may go without receiving anything (a message, a text delta,
an audio frame, a function call) before it is failed; see ``response_stall_timeout``."""


def check_response_stall_timeout(value: float | None) -> float | None:
    """Validate a model's ``response_stall_timeout`` option (None disables the deadline).

    Raises:
        ValueError: it is not a positive number or None.
    """
    if value is not None and not value > 0:
        raise ValueError(f"response_stall_timeout must be a positive number of seconds or "
                         f"None, got {value!r}")
    return value


class RealtimeError(AgentsTrioError):
    """The realtime server refused a call (e.g. a chat context update it cannot apply)."""


class RealtimeSessionClosedError(RealtimeError):
    """A call reached a realtime session after it was closed."""


class RealtimeResponseStalledError(RealtimeError, APIError):
    """A realtime response received nothing for its model's ``response_stall_timeout``.

    Recoverable: the response is failed (reported as an ``error`` event), the session goes on
    with the next turn.
    """

    def __init__(self, message: str) -> None:
        APIError.__init__(self, message, recoverable=True)


class RealtimeUnavailable(RealtimeError):
    """The activity has no live realtime session (it is paused, handed over or closing); the
    speech that needed it ends quietly."""


class RealtimeCapabilities(msgspec.Struct, kw_only=True, frozen=True):
    message_truncation: bool = False
    turn_detection: bool = False
    user_transcription: bool = False
    auto_tool_reply_generation: bool = False
    audio_output: bool = False
    manual_function_calls: bool = True
    mutable_chat_context: bool = False
    mutable_instructions: bool = False
    mutable_tools: bool = False
    supports_say: bool = False


class MessageGeneration(msgspec.Struct, kw_only=True):
    """One assistant message of a generation: text deltas and audio frames as channels."""

    message_id: str
    text_stream: Any  # trio.MemoryReceiveChannel[str]
    audio_stream: Any  # trio.MemoryReceiveChannel[rtc.AudioFrame]
    modalities: list[str] = msgspec.field(default_factory=lambda: ["text", "audio"])


class GenerationCreatedEvent(msgspec.Struct, kw_only=True):
    """A response of the model: its messages and function calls, each as a channel.

    ``user_initiated``: the response answers a ``generate_reply()``/``say()`` request, which
    returns it; out of ``events()`` only a server-initiated one (``False``) is a new speech.
    """

    message_stream: Any  # trio.MemoryReceiveChannel[MessageGeneration]
    function_stream: Any  # trio.MemoryReceiveChannel[FunctionCall]
    user_initiated: bool = False
    response_id: str = ""
    type: Literal["generation_created"] = "generation_created"


class InputSpeechStartedEvent(msgspec.Struct, kw_only=True):
    type: Literal["input_speech_started"] = "input_speech_started"


class InputSpeechStoppedEvent(msgspec.Struct, kw_only=True):
    user_transcription_enabled: bool = True
    type: Literal["input_speech_stopped"] = "input_speech_stopped"


class InputTranscriptionCompleted(msgspec.Struct, kw_only=True):
    item_id: str
    transcript: str
    is_final: bool = True
    confidence: float = 1.0
    turn_started_at: float | None = None
    type: Literal["input_audio_transcription_completed"] = "input_audio_transcription_completed"


class SessionReconnectedEvent(msgspec.Struct, kw_only=True):
    type: Literal["session_reconnected"] = "session_reconnected"


class RealtimeErrorEvent(msgspec.Struct, kw_only=True):
    error: Any
    recoverable: bool = True
    type: Literal["error"] = "error"


RealtimeEvent = Union[GenerationCreatedEvent, InputSpeechStartedEvent, InputSpeechStoppedEvent,
                      InputTranscriptionCompleted, SessionReconnectedEvent, RealtimeErrorEvent,
                      RealtimeModelMetrics]


class RealtimeSession(Protocol):
    """One connection to a realtime model (see the module docstring).

    Cancellation: the async methods are cancelled when the activity pauses, hands over or
    closes (the link then closes the session); they must be safe to cancel at any checkpoint.
    """

    def events(self) -> AsyncIterator[RealtimeEvent]: ...

    async def update_instructions(self, instructions: str) -> None:
        """Replace the session's instructions.

        Cancellation: the runtime cancels it when the session stops being live (a handoff, a
        pause, the close) and then closes the session, so a partial update need not be
        undone; the call must let ``trio.Cancelled`` through.
        """
        ...

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        """Replace the session's conversation with ``chat_ctx``.

        Cancellation: as :meth:`update_instructions`, and also when the reply it precedes
        is interrupted, the session staying live: the call must then leave the session
        usable (every reply sends the whole context again first).
        """
        ...

    async def update_tools(self, tools: list[Any]) -> None:
        """Replace the session's tools.

        Cancellation: as :meth:`update_instructions`.
        """
        ...

    def push_audio(self, frame: rtc.AudioFrame) -> None: ...
    def commit_audio(self) -> None: ...
    def clear_audio(self) -> None: ...

    async def generate_reply(self, *, instructions: str | None = None,
                             tool_choice: ToolChoice | None = None) -> GenerationCreatedEvent:
        """Ask for a response; return its generation once the server created it.

        Cancellation: the runtime cancels it when the speech is interrupted or the session
        stops being live, and calls no ``interrupt()`` for it: a cancelled call should stop
        or drop the response it asked for, which must not come out of ``events()`` later as
        a server-initiated generation (one that comes out marked ``user_initiated`` is
        ignored: a request owns its response, whether its call returned it or was
        cancelled).
        """
        ...

    def interrupt(self) -> None: ...
    def truncate(self, *, message_id: str, audio_end_ms: int,
                 audio_transcript: str | None = None) -> None: ...

    async def say(self, text: str) -> GenerationCreatedEvent:
        """Ask for ``text`` to be spoken; return its generation once the server created it.

        Cancellation: as :meth:`generate_reply`.
        """
        ...


@runtime_checkable
class RealtimeModel(Protocol):
    """A realtime model: ``capabilities`` and ``session()``.

    A model may also carry ``response_stall_timeout`` (seconds, or None for no bound): a
    response that receives nothing for that long is failed with an ``error`` event
    (:class:`RealtimeResponseStalledError`). Without it, ``DEFAULT_RESPONSE_STALL_TIMEOUT``
    applies.

    ``session()`` may fail (entering it, an ``update_*`` call other than a refusal, its
    ``events()`` or its exit raise): the runtime reports an ``error`` event, and connects
    again when the error is an ``APIError`` marked ``retryable``, as LiveKit's realtime
    plugins do, following the model's ``conn_options`` (an ``APIConnectOptions``; the
    default one without it); any other error, or the last retry's, closes the session with
    reason ``error``. A model that retries inside ``session()`` itself raises a
    non-retryable error when it gives up. A :class:`RealtimeError` from an ``update_*``
    call is the server refusing that update: it is logged and the session goes on.
    """

    capabilities: RealtimeCapabilities

    def session(self) -> AbstractAsyncContextManager[RealtimeSession]: ...


def is_realtime_model(model: object) -> TypeIs[RealtimeModel]:
    """A realtime model (a ``session()`` with ``capabilities``), not a pipeline LLM."""
    return model is not None and hasattr(model, "capabilities") and hasattr(model, "session") \
        and not hasattr(model, "chat")


def open_generation_channels() -> tuple[Any, Any, Any, Any]:
    """Send/receive channel pairs for a generation's messages and function calls."""
    msg_send, msg_recv = trio.open_memory_channel[MessageGeneration](float("inf"))
    fn_send, fn_recv = trio.open_memory_channel[FunctionCall](float("inf"))
    return msg_send, msg_recv, fn_send, fn_recv
