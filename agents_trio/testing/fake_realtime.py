"""FakeRealtimeModel: a scripted realtime server under Trio time.

Responses are keyed like ``FakeLLM``'s: by the instructions of ``generate_reply`` if given,
else by the text of the last item of the chat context the session was last given (a user
message, or a function output). Server-side behaviour is driven by the test with ``emit_*``.
Every call is recorded in ``calls``; a call reaching a closed session is recorded in the
model's ``violations`` and raises ``RealtimeSessionClosedError`` — it fails loudly.

A ``generate_reply`` cancelled while the server was thinking (its ``ttft``) has gone out: the
fake server creates the response anyway, when its ``ttft`` is over, and the session then does
what ``abandoned_responses`` says (see ``FakeRealtimeModel``).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

import msgspec
import trio
from livekit import rtc

from .._ids import short_id
from ..chat import ChatContext, ChatMessage, FunctionCall, FunctionCallOutput
from ..events import RealtimeModelMetrics
from ..models import FunctionToolCall, ToolChoice
from ..realtime import (DEFAULT_RESPONSE_STALL_TIMEOUT, GenerationCreatedEvent,
                        InputSpeechStartedEvent, InputSpeechStoppedEvent,
                        InputTranscriptionCompleted, MessageGeneration, RealtimeCapabilities,
                        RealtimeErrorEvent, RealtimeSessionClosedError, SessionReconnectedEvent,
                        check_response_stall_timeout, open_generation_channels)

SAMPLE_RATE = 24000
T = TypeVar("T")


class FakeRealtimeResponse(msgspec.Struct, kw_only=True):
    input: str
    text: str = ""
    audio_duration: float = 0.0
    function_calls: list[FunctionToolCall] = msgspec.field(default_factory=list)
    ttft: float = 0.1
    stall: bool = False  # send everything, then never close the streams (a lost response end)
    input_tokens: int = 0   # billed for the response (reported in its RealtimeModelMetrics)
    output_tokens: int = 0


class FakeRealtimeModel:
    """A realtime model whose sessions follow scripted responses (see the module docstring).

    Args:
        responses: Scripted responses (see ``add_response``).
        capabilities: What the fake server supports (default: everything but ``say``).
        response_stall_timeout: The model option of that name (see ``RealtimeModel``).
        abandoned_responses: What a session does with the response of a ``generate_reply``
            cancelled after it went out, once the server created it: ``"drop"`` it (recorded
            in the session's ``dropped``), or ``"emit"`` it out of ``events()`` as a
            user-initiated generation (what a LiveKit plugin does for a request whose
            future is still pending), which the runtime must not play either.
        connect_delays: Seconds each new session takes to connect, in order (sessions past
            the list connect at once); ``math.inf`` never connects. A connecting session is
            in ``sessions`` and live until its block exits.
        connect_errors: The error each new session's connecting raises once its delay is
            over, in order (None, and sessions past the list, connect): a connection that
            fails. The failed session is in ``sessions``, closed.
        update_errors: The error the first ``update_*`` call of each new session raises, in
            order (None, and sessions past the list: no error): a set-up that fails.
        update_latency: Seconds each ``update_*`` call takes before the server applied it.
    """

    def __init__(self, responses: list[FakeRealtimeResponse] | None = None, *,
                 capabilities: RealtimeCapabilities | None = None,
                 response_stall_timeout: float | None = DEFAULT_RESPONSE_STALL_TIMEOUT,
                 abandoned_responses: Literal["drop", "emit"] = "drop",
                 connect_delays: list[float] | None = None,
                 connect_errors: list[BaseException | None] | None = None,
                 update_errors: list[BaseException | None] | None = None,
                 update_latency: float = 0.0) -> None:
        self.connect_delays = list(connect_delays or [])
        self.connect_errors = list(connect_errors or [])
        self.update_errors = list(update_errors or [])
        self.update_latency = update_latency
        self.response_stall_timeout = check_response_stall_timeout(response_stall_timeout)
        self.abandoned_responses = abandoned_responses
        self.capabilities = capabilities or RealtimeCapabilities(
            message_truncation=True, turn_detection=True, user_transcription=True,
            audio_output=True, manual_function_calls=True, mutable_chat_context=True,
            mutable_instructions=True, mutable_tools=True, supports_say=False)
        self.responses = list(responses or [])
        self.sessions: list[FakeRealtimeSession] = []
        self.violations: list[str] = []
        self.max_live_sessions = 0

    def add_response(self, input: str, text: str = "", *, audio_duration: float = 0.0,
                     function_calls: list[FunctionToolCall] | None = None,
                     ttft: float = 0.1, stall: bool = False, input_tokens: int = 0,
                     output_tokens: int = 0) -> FakeRealtimeModel:
        """Script the answer to ``input``; ``stall`` keeps its streams open after the last
        item, as a server whose end of response got lost. The tokens are reported in the
        response's ``RealtimeModelMetrics`` once it is done (text input, audio output)."""
        self.responses.append(FakeRealtimeResponse(
            input=input, text=text, audio_duration=audio_duration,
            function_calls=list(function_calls or []), ttft=ttft, stall=stall,
            input_tokens=input_tokens, output_tokens=output_tokens))
        return self

    @property
    def live_sessions(self) -> list[FakeRealtimeSession]:
        return [s for s in self.sessions if not s.closed]

    def find(self, key: str) -> FakeRealtimeResponse | None:
        for r in self.responses:
            if r.input == key:
                return r
        return None

    @asynccontextmanager
    async def session(self) -> AsyncIterator[FakeRealtimeSession]:
        """A new fake connection (recorded in ``sessions``), closed when the block exits.

        Cancellation: see :meth:`FakeRealtimeSession.connected`.
        """
        index = len(self.sessions)
        session = FakeRealtimeSession(self, update_error=_nth(self.update_errors, index))
        delay = _nth(self.connect_delays, index) or 0.0
        self.sessions.append(session)
        self.max_live_sessions = max(self.max_live_sessions, len(self.live_sessions))
        async with session.connected(delay, error=_nth(self.connect_errors, index)):
            yield session


def _nth(values: list[T], index: int) -> T | None:
    return values[index] if index < len(values) else None


class _Failure:
    """Queued by ``emit_failure``: the events stream raises ``error`` when it gets there."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Events:
    """A session's server events, in order; ``emit_failure`` makes the iteration raise."""

    def __init__(self, receive: trio.MemoryReceiveChannel[Any]) -> None:
        self._receive = receive

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> Any:  # noqa: ANN401 - a realtime event
        try:
            ev = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None
        if isinstance(ev, _Failure):
            raise ev.error
        return ev


class FakeRealtimeSession:
    """One fake connection. Test-side API: ``emit_*``; runtime-side: the protocol calls."""

    def __init__(self, model: FakeRealtimeModel, *,
                 update_error: BaseException | None = None) -> None:
        self.model = model
        self._update_error = update_error
        self.id = short_id("rt")
        self.closed = False
        self.calls: list[tuple[str, Any]] = []
        self.audio_pushed = 0.0
        self.chat_ctx = ChatContext()
        self.instructions: str | None = None
        self.tools: list[str] = []
        self.dropped: list[str] = []  # the inputs of abandoned responses the session dropped
        self._events_send, self._events_recv = trio.open_memory_channel[Any](math.inf)
        self._nursery: trio.Nursery | None = None
        self._silence = bytes(2 * SAMPLE_RATE // 100)

    def __repr__(self) -> str:
        return f"FakeRealtimeSession({self.id}, closed={self.closed})"

    @asynccontextmanager
    async def connected(self, delay: float = 0.0, *, error: BaseException | None = None
                        ) -> AsyncIterator[FakeRealtimeSession]:
        """The connection's lifetime (:meth:`FakeRealtimeModel.session` enters it): it
        connects for ``delay`` seconds (then raises ``error``, if given: the connection
        failed), its tasks run in a nursery of its own; leaving the block cancels them and
        closes it.

        Cancellation: cancelling the block (or the connecting) cancels the session's tasks;
        it closes all the same.
        """
        try:
            if delay:
                await trio.sleep(delay)
            if error is not None:
                raise error
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    yield self
                finally:
                    # closed from the moment its block exits: the nursery takes no new task
                    # while it waits for its tasks, so nothing may be emitted meanwhile
                    self._close()
                    nursery.cancel_scope.cancel()
        finally:
            self._close()

    def _close(self) -> None:
        self.closed = True
        self._events_send.close()

    def _check(self, call: str, arg: object = None) -> None:
        if self.closed:
            self.model.violations.append(f"{call} on closed session {self.id}")
            raise RealtimeSessionClosedError(f"{call}() on a closed realtime session")
        if call != "push_audio":
            self.calls.append((call, arg))

    def call_names(self) -> list[str]:
        return [name for name, _ in self.calls]

    # -- protocol ------------------------------------------------------------------------------
    def events(self) -> AsyncIterator[Any]:
        return _Events(self._events_recv)

    async def update_instructions(self, instructions: str) -> None:
        """Record the instructions (``instructions``, ``calls``).

        Cancellation: a checkpoint only with the model's ``update_latency``; cancelled then,
        the update is not applied.
        """
        await self._server_latency("update_instructions")
        self._check("update_instructions", instructions)
        self.instructions = instructions

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        """Record a copy of the chat context (``chat_ctx``, ``calls``).

        Cancellation: a checkpoint only with the model's ``update_latency``; cancelled then,
        the update is not applied.
        """
        chat_ctx = chat_ctx.copy()  # what was asked, whatever happens to it meanwhile
        await self._server_latency("update_chat_ctx")
        self._check("update_chat_ctx", chat_ctx.copy())
        self.chat_ctx = chat_ctx.copy()

    async def update_tools(self, tools: list[Any]) -> None:
        """Record the tools' names (``tools``, ``calls``).

        Cancellation: a checkpoint only with the model's ``update_latency``; cancelled then,
        the update is not applied.
        """
        names = [t.name for t in tools]
        await self._server_latency("update_tools")
        self._check("update_tools", names)
        self.tools = names

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        self._check("push_audio")
        self.audio_pushed += frame.duration

    def commit_audio(self) -> None:
        self._check("commit_audio")

    def clear_audio(self) -> None:
        self._check("clear_audio")

    def interrupt(self) -> None:
        self._check("interrupt")

    def truncate(self, *, message_id: str, audio_end_ms: int,
                 audio_transcript: str | None = None) -> None:
        self._check("truncate", (message_id, audio_end_ms, audio_transcript))

    async def generate_reply(self, *, instructions: str | None = None,
                             tool_choice: ToolChoice | None = None) -> GenerationCreatedEvent:
        """Start the response scripted for the instructions (or the last user text) after its
        ``ttft``.

        Cancellation: a checkpoint (the ``ttft`` wait). The request has gone out: the server
        creates the response all the same, and the session drops or emits it as the model's
        ``abandoned_responses`` says; it never comes out as a server-initiated generation.
        """
        self._check("generate_reply", instructions)
        key = instructions if instructions is not None else self._last_text()
        response = self.model.find(key) or FakeRealtimeResponse(input=key)
        created_at = trio.current_time() + response.ttft
        try:
            await trio.sleep_until(created_at)
        except trio.Cancelled:
            if not self.closed and self._nursery is not None:
                self._nursery.start_soon(self._abandoned, response, created_at)
            raise
        if self.closed:  # closed while the server was thinking: the call fails
            raise RealtimeSessionClosedError("the realtime session closed during generate_reply")
        return self._start_generation(response, user_initiated=True)

    async def say(self, text: str) -> GenerationCreatedEvent:
        """Start a response speaking ``text``.

        Cancellation: not a checkpoint; the call takes effect at once.
        """
        self._check("say", text)
        return self._start_generation(FakeRealtimeResponse(
            input="", text=text, audio_duration=0.06 * len(text.split())), user_initiated=True)

    # -- server side (driven by the test) ------------------------------------------------------
    def emit_speech_started(self) -> None:
        self._events_send.send_nowait(InputSpeechStartedEvent())

    def emit_speech_stopped(self) -> None:
        self._events_send.send_nowait(InputSpeechStoppedEvent())

    def emit_transcription(self, transcript: str, *, item_id: str | None = None) -> str:
        item_id = item_id or short_id("item")
        self._events_send.send_nowait(InputTranscriptionCompleted(
            item_id=item_id, transcript=transcript, turn_started_at=None))
        return item_id

    def emit_generation(self, text: str = "", *, audio_duration: float = 0.0,
                        function_calls: list[FunctionToolCall] | None = None,
                        stall: bool = False) -> None:
        """A server-initiated response (server turn detection answered the user); ``stall``
        keeps its streams open after the last item."""
        ev = self._start_generation(FakeRealtimeResponse(
            input="", text=text, audio_duration=audio_duration,
            function_calls=list(function_calls or []), stall=stall), user_initiated=False)
        self._events_send.send_nowait(ev)

    def emit_error(self, error: Exception, *, recoverable: bool = True) -> None:
        self._events_send.send_nowait(RealtimeErrorEvent(error=error, recoverable=recoverable))

    def emit_reconnected(self) -> None:
        self._events_send.send_nowait(SessionReconnectedEvent())

    def emit_failure(self, error: BaseException) -> None:
        """The connection drops: the events stream raises ``error`` after what is queued."""
        self._events_send.send_nowait(_Failure(error))

    def end_events(self) -> None:
        """The server closes the session cleanly: the events stream ends after what is
        queued (nothing more can be emitted)."""
        self._events_send.close()

    # -- internals -----------------------------------------------------------------------------
    async def _server_latency(self, call: str) -> None:
        if self.closed:
            self._check(call)  # raises
        if self.model.update_latency:
            await trio.sleep(self.model.update_latency)
        error, self._update_error = self._update_error, None
        if error is not None:
            raise error  # not applied

    async def _abandoned(self, response: FakeRealtimeResponse, created_at: float) -> None:
        """The server creates the response of a cancelled ``generate_reply`` anyway."""
        await trio.sleep_until(created_at)
        if self.model.abandoned_responses == "emit":
            self._events_send.send_nowait(self._start_generation(response, user_initiated=True))
        else:
            self.dropped.append(response.input)

    def _last_text(self) -> str:
        for item in reversed(self.chat_ctx.items):
            if isinstance(item, ChatMessage) and item.role == "user":
                return item.text_content or ""
            if isinstance(item, FunctionCallOutput):
                return item.output
        return ""

    def _start_generation(self, response: FakeRealtimeResponse, *,
                          user_initiated: bool) -> GenerationCreatedEvent:
        assert self._nursery is not None
        msg_send, msg_recv, fn_send, fn_recv = open_generation_channels()
        response_id = short_id("resp")
        self._nursery.start_soon(self._produce, response, response_id, msg_send, fn_send)
        return GenerationCreatedEvent(message_stream=msg_recv, function_stream=fn_recv,
                                      user_initiated=user_initiated, response_id=response_id)

    async def _produce(self, response: FakeRealtimeResponse, response_id: str,
                       msg_send: trio.MemorySendChannel[MessageGeneration],
                       fn_send: trio.MemorySendChannel[FunctionCall]) -> None:
        created_at = trio.current_time()
        await self._send_response(response, msg_send, fn_send)
        if self.closed:
            return
        # the server's response is done: its metrics follow, as a LiveKit plugin's do
        duration = trio.current_time() - created_at
        spoke = bool(response.text or response.audio_duration)
        self._events_send.send_nowait(RealtimeModelMetrics(
            timestamp=created_at, request_id=response_id, ttft=0.0 if spoke else -1.0,
            duration=duration, input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            total_tokens=response.input_tokens + response.output_tokens,
            tokens_per_second=response.output_tokens / duration if duration > 0 else 0.0,
            input_token_details=RealtimeModelMetrics.InputTokenDetails(
                text_tokens=response.input_tokens),
            output_token_details=RealtimeModelMetrics.OutputTokenDetails(
                audio_tokens=response.output_tokens)))

    async def _send_response(self, response: FakeRealtimeResponse,
                             msg_send: trio.MemorySendChannel[MessageGeneration],
                             fn_send: trio.MemorySendChannel[FunctionCall]) -> None:
        async with msg_send, fn_send:
            text_send, text_recv = trio.open_memory_channel[str](math.inf)
            audio_send, audio_recv = trio.open_memory_channel[rtc.AudioFrame](math.inf)
            with text_send, audio_send:
                if response.text or response.audio_duration:
                    msg_send.send_nowait(MessageGeneration(message_id=short_id("item"),
                                                           text_stream=text_recv,
                                                           audio_stream=audio_recv))
                    for i in range(0, len(response.text), 3):
                        text_send.send_nowait(response.text[i:i + 3])
                    samples = SAMPLE_RATE // 100
                    for _ in range(int(round(response.audio_duration * 100))):
                        audio_send.send_nowait(rtc.AudioFrame(self._silence, SAMPLE_RATE, 1,
                                                              samples))
                    if not response.stall:
                        text_send.close()
                        audio_send.close()
                for call in response.function_calls:
                    fn_send.send_nowait(FunctionCall(call_id=call.call_id or short_id("call"),
                                                     name=call.name, arguments=call.arguments))
                if response.stall:
                    await trio.sleep_forever()  # until the session closes
