"""A LiveKit Agents ``llm.RealtimeModel`` as a Trio ``RealtimeModel`` (``agents_trio.realtime``).

The LiveKit session's calls become awaitables or sync calls queued into the loop in order,
and its events (``generation_created``, ``input_speech_started``, …) come back through
``rt.events()`` as agents_trio's realtime events. A generation's message, text, audio and
function-call streams are pumped into Trio channels by tasks owned by the session adapter, so
leaving ``async with model.session()`` stops them all and closes the LiveKit session. A
generation's streams have an owner of their own: one that fails ends that generation only
(reported once, as an ``error`` event), never the session.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar, TypeVar

import trio
from livekit import rtc
from livekit.agents import llm as lk_llm
from livekit.agents import metrics as lk_metrics

from ..chat import ChatContext, FunctionCall
from ..events import (Metadata, RealtimeCachedTokenDetails, RealtimeInputTokenDetails,
                      RealtimeModelMetrics, RealtimeOutputTokenDetails)
from ..io.bridge import AsyncioBridge, BridgeFeeder, BridgeReceiveChannel
from ..models import ToolChoice
from ..realtime import (
    DEFAULT_RESPONSE_STALL_TIMEOUT,
    GenerationCreatedEvent,
    InputSpeechStartedEvent,
    InputSpeechStoppedEvent,
    InputTranscriptionCompleted,
    MessageGeneration,
    RealtimeCapabilities,
    RealtimeError,
    RealtimeErrorEvent,
    RealtimeSessionClosedError,
    SessionReconnectedEvent,
    check_response_stall_timeout,
    open_generation_channels,
)
from ._common import (
    aclose_plugin_stream,
    logger,
    open_nursery,
    resolve_bridge,
    to_api_error,
)
from ._convert import from_lk_function_call, to_lk_chat_ctx, to_lk_tool_choice, to_lk_tools

_EVENTS = ("input_speech_started", "input_speech_stopped", "input_audio_transcription_completed",
           "generation_created", "session_reconnected", "error", "metrics_collected")
_CAPABILITIES = ("message_truncation", "turn_detection", "user_transcription",
                 "auto_tool_reply_generation", "audio_output", "manual_function_calls",
                 "mutable_chat_context", "mutable_instructions", "mutable_tools", "supports_say")
MODALITIES_TIMEOUT = 5.0

T = TypeVar("T")


class RealtimeModelAdapter:
    """Wraps a LiveKit Agents realtime model (``openai.realtime.RealtimeModel()``,
    ``google.beta.realtime.RealtimeModel()``, …) for agents_trio.

    Args:
        model: The LiveKit Agents realtime model.
        bridge: The bridge to run it on (default: the current bridge when a session opens).
        response_stall_timeout: Seconds a response may receive nothing (no message, text,
            audio or function call) before it is failed with an ``error`` event; None waits
            for the provider without a bound.

    Raises:
        TypeError: ``model`` is not a LiveKit realtime model.
        ValueError: ``response_stall_timeout`` is not positive.
    """

    #: where a session or agent takes it (``llm=``)
    model_kind: ClassVar[str] = "llm"

    def __init__(self, model: lk_llm.RealtimeModel, *, bridge: AsyncioBridge | None = None,
                 response_stall_timeout: float | None = DEFAULT_RESPONSE_STALL_TIMEOUT
                 ) -> None:
        if not isinstance(model, lk_llm.RealtimeModel):
            raise TypeError(f"RealtimeModelAdapter wraps a livekit.agents.llm.RealtimeModel, "
                            f"got {model!r}")
        self.response_stall_timeout = check_response_stall_timeout(response_stall_timeout)
        self.model = model
        self._bridge = bridge
        caps = model.capabilities
        self.capabilities = RealtimeCapabilities(**{
            name: bool(getattr(caps, name, False)) for name in _CAPABILITIES})

    @property
    def label(self) -> str:
        return self.model.label

    @asynccontextmanager
    async def session(self) -> AsyncIterator[RealtimeSessionAdapter]:
        """Open a LiveKit realtime session; leaving the block closes it.

        Cancellation:
            Owns the session and every task pumping its events and generations; they end
            with the block, and the LiveKit session is closed (shielded, bounded).
        """
        bridge = await resolve_bridge(self._bridge)
        try:
            lk_session = await bridge.run_sync(self.model.session)
        except Exception as e:
            raise to_api_error(e, self.label) from e
        rt = RealtimeSessionAdapter(bridge, lk_session, self.label)
        async with rt.running():
            yield rt

    def __repr__(self) -> str:
        return f"RealtimeModelAdapter({self.model!r})"


class RealtimeSessionAdapter:
    """One LiveKit realtime session, as agents_trio's ``RealtimeSession``.

    Sync calls (``push_audio``, ``commit_audio``, ``clear_audio``, ``interrupt``,
    ``truncate``) are queued into the loop in the order they were made; the others await the
    plugin. Every call after the session closed raises ``RealtimeSessionClosedError``.
    """

    def __init__(self, bridge: AsyncioBridge, lk_session: lk_llm.RealtimeSession[Any],
                 label: str) -> None:
        self._bridge = bridge
        self.lk_session = lk_session
        self._label = label
        self._calls: BridgeFeeder[rtc.AudioFrame] = bridge.feeder(lk_session.push_audio)
        self._events_send, self._events_recv = trio.open_memory_channel[object](math.inf)
        self._nursery: trio.Nursery | None = None
        self.closed = False

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Internal (``RealtimeModelAdapter.session``): route the LiveKit session's events
        and own the generation pumps for the block; leaving it closes the LiveKit session.

        Cancellation: leaving the block by a cancellation too cancels the pumps, marks the
        session closed (later calls raise) and closes the LiveKit session (shielded, bounded).
        """
        lk_session = self.lk_session
        push, raw_events = self._bridge.callback_channel(
            convert=lambda name, ev=None: (name, ev))
        handlers = {name: (lambda ev=None, _n=name: push(_n, ev)) for name in _EVENTS}
        for name, handler in handlers.items():
            lk_session.on(name, handler)
        try:
            async with open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._route_events, raw_events)
                try:
                    yield
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            self.closed = True
            self._events_send.close()
            for name, handler in handlers.items():
                lk_session.off(name, handler)
            raw_events.close()
            await aclose_plugin_stream(self._bridge, lk_session, self._label)

    def _check(self, call: str) -> None:
        if self.closed:
            raise RealtimeSessionClosedError(f"{call}() on a closed realtime session")

    # -- events ---------------------------------------------------------------------------------
    def events(self) -> AsyncIterator[object]:
        """Server events until the session closes (one consumer)."""
        return self._events_recv.__aiter__()

    async def _route_events(self, raw_events: BridgeReceiveChannel[tuple[str, object]]
                            ) -> None:
        async for name, ev in raw_events:
            try:
                converted = self._convert_event(name, ev)
            except Exception:
                logger.exception("could not convert realtime event %r", name)
                continue
            if converted is not None:
                self._events_send.send_nowait(converted)

    def _convert_event(self, name: str, ev: object) -> object:
        if name == "input_speech_started":
            return InputSpeechStartedEvent()
        if name == "input_speech_stopped":
            return InputSpeechStoppedEvent(
                user_transcription_enabled=getattr(ev, "user_transcription_enabled", True))
        if name == "input_audio_transcription_completed" and isinstance(
                ev, lk_llm.InputTranscriptionCompleted):
            return InputTranscriptionCompleted(
                item_id=ev.item_id, transcript=ev.transcript, is_final=ev.is_final,
                confidence=ev.confidence if ev.confidence is not None else 1.0)
        if name == "session_reconnected":
            return SessionReconnectedEvent()
        if name == "metrics_collected" and isinstance(ev, lk_metrics.RealtimeModelMetrics):
            return from_lk_realtime_metrics(ev)
        if name == "error":
            error = getattr(ev, "error", ev)
            if not isinstance(error, BaseException):
                error = RuntimeError(repr(error))
            recoverable = bool(getattr(ev, "recoverable", False))
            return RealtimeErrorEvent(
                error=to_api_error(error, self._label, retryable=recoverable),
                recoverable=recoverable)
        if name == "generation_created" and isinstance(
                ev, lk_llm.GenerationCreatedEvent) and not ev.user_initiated:
            # user-initiated generations are returned by generate_reply()/say() instead, or
            # dropped with their abandoned request (see _abandon)
            return self._generation(ev)
        return None

    def _generation(self, ev: lk_llm.GenerationCreatedEvent) -> GenerationCreatedEvent:
        assert self._nursery is not None
        msg_send, msg_recv, fn_send, fn_recv = open_generation_channels()
        self._nursery.start_soon(self._pump_generation, ev, msg_send, fn_send)
        return GenerationCreatedEvent(message_stream=msg_recv, function_stream=fn_recv,
                                      user_initiated=bool(ev.user_initiated),
                                      response_id=ev.response_id or "")

    async def _pump_generation(self, ev: lk_llm.GenerationCreatedEvent,
                               msg_send: trio.MemorySendChannel[MessageGeneration],
                               fn_send: trio.MemorySendChannel[FunctionCall]) -> None:
        """Pump one generation's streams (messages, their text and audio, function calls)
        into its channels, in a nursery of its own.

        A stream that fails is the generation's failure, not the session's: it ends every
        stream of the generation (the consumer sees them end with what arrived) and is
        reported once, as a recoverable ``error`` event (the provider session goes on; an
        unrecoverable one would close the agent session); the session and its other
        generations go on.

        Cancellation: the session's close cancels it; nothing is reported.
        """
        failures: list[Exception] = []
        async with trio.open_nursery() as nursery:
            def start(pump: Callable[..., Awaitable[None]], *args: object) -> None:
                nursery.start_soon(_failing_into, failures, nursery.cancel_scope, pump, args)

            start(self._pump_messages, ev.message_stream, msg_send, start)
            start(self._pump, ev.function_stream, fn_send, from_lk_function_call)
        if failures:
            logger.warning("%s: the response %r failed: %r", self._label, ev.response_id,
                           failures[0])
            self._events_send.send_nowait(RealtimeErrorEvent(
                error=to_api_error(failures[0], self._label), recoverable=True))

    async def _pump_messages(self, stream: AsyncIterable[lk_llm.MessageGeneration],
                             send: trio.MemorySendChannel[MessageGeneration],
                             start: Callable[..., None]) -> None:
        """Pump the messages into ``send``; ``start`` each one's text and audio pumps (in
        the generation's nursery)."""
        async with send, self._bridge.open_receive_channel(stream) as messages:
            async for message in messages:
                text_send, text_recv = trio.open_memory_channel[str](math.inf)
                audio_send, audio_recv = trio.open_memory_channel[rtc.AudioFrame](math.inf)
                modalities = await self._modalities(message)
                try:
                    send.send_nowait(MessageGeneration(message_id=message.message_id,
                                                       text_stream=text_recv,
                                                       audio_stream=audio_recv,
                                                       modalities=modalities))
                except trio.BrokenResourceError:
                    return  # the consumer closed the channel: it takes no more messages
                start(self._pump, message.text_stream, text_send, str)
                start(self._pump, message.audio_stream, audio_send, None)

    async def _modalities(self, message: lk_llm.MessageGeneration) -> list[str]:
        """The message's modalities; both when the plugin's future fails or takes longer
        than ``MODALITIES_TIMEOUT`` (the future is left to the plugin, never cancelled)."""
        with trio.move_on_after(MODALITIES_TIMEOUT):
            try:
                return list(await self._bridge.run(_await_shielded, message.modalities))
            except Exception as e:
                logger.debug("%s: the modalities of message %r failed: %r", self._label,
                             message.message_id, e)
        return ["text", "audio"]

    async def _pump(self, stream: AsyncIterable[T], send: trio.MemorySendChannel[Any],
                    convert: Callable[[T], object] | None) -> None:
        """Pump ``stream`` into ``send`` until it ends, or until the consumer closed the
        channel (then the rest of the stream is not read)."""
        async with send, self._bridge.open_receive_channel(stream) as items:
            async for item in items:
                try:
                    send.send_nowait(convert(item) if convert else item)
                except trio.BrokenResourceError:
                    return

    # -- calls ----------------------------------------------------------------------------------
    async def _call(self, name: str, fn: Callable[..., Awaitable[T]], *args: object,
                    **kwargs: object) -> T:
        self._check(name)
        try:
            return await self._bridge.run(fn, *args, **kwargs)
        except lk_llm.RealtimeError as e:
            raise RealtimeError(f"{self._label}: {e}") from e

    async def update_instructions(self, instructions: str) -> None:
        """Replace the session's instructions.

        Cancellation: cancels the plugin's call (as ``bridge.run``); the update may or may
        not have reached the provider, and the session stays usable.
        """
        await self._call("update_instructions", self.lk_session.update_instructions,
                         instructions)

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        """Replace the session's conversation with ``chat_ctx``.

        Cancellation: as :meth:`update_instructions`.
        """
        await self._call("update_chat_ctx", self.lk_session.update_chat_ctx,
                         to_lk_chat_ctx(chat_ctx))

    async def update_tools(self, tools: list[object]) -> None:
        """Replace the session's tools.

        Cancellation: as :meth:`update_instructions`.
        """
        await self._call("update_tools", self.lk_session.update_tools, to_lk_tools(tools))

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        self._check("push_audio")
        self._calls.feed(frame)

    def commit_audio(self) -> None:
        self._check("commit_audio")
        self._calls.call(self.lk_session.commit_audio)

    def clear_audio(self) -> None:
        self._check("clear_audio")
        self._calls.call(self.lk_session.clear_audio)

    def interrupt(self) -> None:
        self._check("interrupt")
        self._calls.call(self.lk_session.interrupt)

    def truncate(self, *, message_id: str, audio_end_ms: int,
                 audio_transcript: str | None = None) -> None:
        self._check("truncate")
        kwargs: dict[str, Any] = {"message_id": message_id, "modalities": ["text", "audio"],
                                  "audio_end_ms": audio_end_ms}
        if audio_transcript is not None:
            kwargs["audio_transcript"] = audio_transcript
        self._calls.call(lambda: self.lk_session.truncate(**kwargs))

    async def generate_reply(self, *, instructions: str | None = None,
                             tool_choice: ToolChoice | None = None
                             ) -> GenerationCreatedEvent:
        """Ask the plugin for a response; return its generation once it was created.

        Cancellation: before the request is sent, nothing is asked. After, the request is
        *abandoned* (see :meth:`_abandon`): the server is told to stop the response
        (``interrupt()``, ordered after the request), and the plugin's future is left
        pending, so a response the server creates anyway is still the request's (the plugin
        reports it as user-initiated) and is dropped: it never comes out of ``events()``.
        """
        self._check("generate_reply")
        kwargs: dict[str, Any] = {}
        if instructions is not None:
            kwargs["instructions"] = instructions
        if tool_choice is not None:
            kwargs["tool_choice"] = to_lk_tool_choice(tool_choice)
        return await self._await_generation("generate_reply", self.lk_session.generate_reply,
                                            **kwargs)

    async def say(self, text: str) -> GenerationCreatedEvent:
        """Ask the plugin to speak ``text``; return its generation once it was created.

        Cancellation: as :meth:`generate_reply`.
        """
        return await self._await_generation("say", self.lk_session.say, text)

    async def _await_generation(
            self, name: str,
            fn: Callable[..., asyncio.Future[lk_llm.GenerationCreatedEvent]], *args: object,
            **kwargs: object) -> GenerationCreatedEvent:
        self._check(name)
        try:
            future = await self._bridge.run_sync(fn, *args, **kwargs)  # the request is out
            try:
                ev = await self._bridge.run(_await_shielded, future)
            except trio.Cancelled:
                self._abandon(name, future)
                raise
        except lk_llm.RealtimeError as e:
            raise RealtimeError(f"{self._label}: {e}") from e
        self._check(name)
        return self._generation(ev)

    def _abandon(self, name: str,
                 future: asyncio.Future[lk_llm.GenerationCreatedEvent]) -> None:
        """The caller of a request that went out gave up on it (an interruption, a handoff,
        the close): stop and drop its response, which must not come out later.

        LiveKit's plugins tell a response they were asked for from a server turn by the
        request's pending future (OpenAI's emits the response of a done future as not
        user-initiated, i.e. as a new turn). So the future is not cancelled (the wait was
        shielded): the abandoned request stays the owner of its response, which the plugin
        reports as user-initiated, ``_convert_event`` never routes, and :meth:`_dropped`
        discards. ``interrupt()``, queued after the request, has the server stop it.
        """
        if self.closed:
            return  # the LiveKit session is closing: its responses go nowhere
        self._calls.call(lambda: future.add_done_callback(lambda f: self._dropped(name, f)))
        self._calls.call(self.lk_session.interrupt)

    def _dropped(self, name: str,
                 future: asyncio.Future[lk_llm.GenerationCreatedEvent]) -> None:
        """(In the loop) an abandoned request's future is done: its response, if the server
        created one, is discarded unread."""
        if future.cancelled() or future.exception() is not None:
            return
        logger.debug("%s: dropped the response %r of an abandoned %s()", self._label,
                     future.result().response_id, name)


async def _failing_into(failures: list[Exception], scope: trio.CancelScope,
                        pump: Callable[..., Awaitable[None]], args: tuple[object, ...]) -> None:
    """Run ``pump(*args)``; its error is added to ``failures`` and cancels ``scope`` (every
    pump of the generation).

    Cancellation: lets ``trio.Cancelled`` through.
    """
    try:
        await pump(*args)
    except Exception as e:
        failures.append(e)
        scope.cancel()


async def _await_shielded(future: asyncio.Future[T]) -> T:
    """(In the loop) wait for a plugin's future; cancelling the wait leaves it pending."""
    return await asyncio.shield(future)


def from_lk_realtime_metrics(ev: lk_metrics.RealtimeModelMetrics) -> RealtimeModelMetrics:
    """LiveKit's record as this runtime's: the same fields; ``timestamp`` (LiveKit's wall
    clock at the response's creation) becomes Trio time, ``duration`` before now."""
    inp, out = ev.input_token_details, ev.output_token_details
    cached = inp.cached_tokens_details
    metadata = ev.metadata
    return RealtimeModelMetrics(
        timestamp=trio.current_time() - ev.duration, label=ev.label,
        request_id=ev.request_id, duration=ev.duration, session_duration=ev.session_duration,
        ttft=ev.ttft, cancelled=ev.cancelled, input_tokens=ev.input_tokens,
        output_tokens=ev.output_tokens, total_tokens=ev.total_tokens,
        tokens_per_second=ev.tokens_per_second,
        input_token_details=RealtimeInputTokenDetails(
            audio_tokens=inp.audio_tokens, text_tokens=inp.text_tokens,
            image_tokens=inp.image_tokens, cached_tokens=inp.cached_tokens,
            cached_tokens_details=None if cached is None else RealtimeCachedTokenDetails(
                audio_tokens=cached.audio_tokens, text_tokens=cached.text_tokens,
                image_tokens=cached.image_tokens)),
        output_token_details=RealtimeOutputTokenDetails(
            text_tokens=out.text_tokens, audio_tokens=out.audio_tokens,
            image_tokens=out.image_tokens),
        acquire_time=ev.acquire_time, connection_reused=ev.connection_reused,
        metadata=None if metadata is None else Metadata(
            model_name=metadata.model_name, model_provider=metadata.model_provider))
