"""RealtimeLink: an activity's realtime session, a child of the activity.

The link keeps a session open while its activity runs and is not paused, feeds it the user's
audio, turns its server events into user states, transcripts and speeches, and is the only way
the activity's speeches reach it. ``session`` is None whenever no session is live — paused,
handed over or closing — and every call in flight is cancelled when its session stops being
live, so nothing can reach a closed session. While the activity runs unpaused and no other
agent took over, the link is live or connecting: a speech (a reply authorized as the agent
resumes after an AgentTask, the tool reply of the call that awaited it) waits for the
connection, as LiveKit's resume sets the session up before its scheduler runs again. Each
connection is a scope of its own that a pause or a handoff ends wherever it is, connecting
included; the ``RealtimeSync`` made with it sends the agent's state, then each change the
agent makes (instructions, tools, chat context, tool outputs), and all of it again after a
reconnect. A connection that fails is the link's to handle (see ``run``): it is reported
through the session's error path and retried or, when final, leaves the link ``failed``
(no session will be live) while the session closes; nothing of it escapes the activity.

The link also knows the responses being received (each in the scope of a
:class:`~agents_trio.realtime_response.RealtimeResponse`): a reconnect ends them (the new
connection will not finish them), and so does a newer turn (``end_responses``), since the
server answers one response at a time. Whatever they received still plays.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import trio
from livekit import rtc

from .instructions import render_instructions
from .chat import ChatContext, ChatItem, ChatMessage
from ._errors import APIConnectionError, APIError
from .events import ErrorEvent, RealtimeModelMetrics, UserInputTranscribedEvent
from .generation import ReplyRequest
from .hosts import ActivityBasics, TurnTaking
from .nurseries import Flag, Wakeup
from .options import DEFAULT_API_CONNECT_OPTIONS
from .realtime import (DEFAULT_RESPONSE_STALL_TIMEOUT, RealtimeCapabilities,
                       RealtimeEvent, RealtimeModel, RealtimeSession, RealtimeUnavailable)
from .realtime_response import RealtimeResponse
from .realtime_sync import Part, RealtimeSync
from .speech_handle import SpeechHandle
from .tools import FunctionTool
from .usage import model_label, model_metadata

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup



class RealtimeHost(ActivityBasics, TurnTaking, Protocol):
    """What a realtime link needs from its activity."""

    @property
    def allow_interruptions(self) -> bool: ...

    @property
    def scheduling_open(self) -> Flag:
        """Set while the activity's scheduler runs (replaced by each pause)."""
        ...

    @property
    def scheduling_closed(self) -> Flag:
        """Set while the activity is paused (replaced by each resume)."""
        ...

    def tools(self) -> list[FunctionTool]: ...

    def commit_item(self, item: ChatItem, handle: SpeechHandle | None = None) -> None: ...

    def start_speech(self, handle: SpeechHandle, request: ReplyRequest, *,
                     user_initiated: bool = True) -> None: ...

    def schedule(self, handle: SpeechHandle, *, force: bool = False) -> None: ...

    def start_soon(self, async_fn: Callable[[], Awaitable[object]]) -> None: ...

logger = logging.getLogger("agents_trio")
T = TypeVar("T")


def _first_error(error: Exception) -> Exception:
    """The first leaf of a group of errors (the connection's failure), else ``error``."""
    while isinstance(error, ExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


async def _cancel_when(event: trio.Event | Flag, nursery: trio.Nursery) -> None:
    await event.wait()
    nursery.cancel_scope.cancel()


class RealtimeLink:
    """The realtime session of one activity (see the module docstring)."""

    def __init__(self, activity: RealtimeHost, model: RealtimeModel) -> None:
        self._activity = activity
        self.model = model
        self.session: Any = None  # the live session, set only while it is open and unpaused
        self._gone = trio.Event()  # set when that session stops being live
        self._ended = trio.Event()  # another agent took over: no new session
        self._closed = trio.Event()  # set while no session is open
        self._closed.set()
        self._connection = trio.CancelScope()  # the current connection's (a new one each)
        self._sync: RealtimeSync | None = None  # what the connected session still needs
        self._live_changed = Wakeup()  # a session became live, or stopped being live
        self._responses: set[RealtimeResponse] = set()  # being received
        #: the error the connection failed with for good (then no session will be live)
        self.failed: Exception | None = None
        self._task_status: trio.TaskStatus[None] | None = None  # run's, until it started

    @property
    def capabilities(self) -> RealtimeCapabilities:
        return self.model.capabilities

    @property
    def response_stall_timeout(self) -> float | None:
        """The model's ``response_stall_timeout`` option (a model without it gets the
        default): seconds a response may receive nothing before it is failed."""
        return getattr(self.model, "response_stall_timeout", DEFAULT_RESPONSE_STALL_TIMEOUT)

    @property
    def server_turn_detection(self) -> bool:
        return (self.capabilities.turn_detection
                and self._activity.options.turn_detection in (None, "realtime_llm"))

    # -- lifetime ------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep a session open while the activity runs and is not paused (until ``end``).

        Each connection, from its first step, lasts only as long as the activity's turn: a
        pause or a handoff ends it wherever it is (connecting, sending the agent's state, or
        live), so neither waits for a server that does not answer.

        A connection that fails (opening it, sending it the agent's state, its events or its
        close raise, or its events end: the server ended the session) is an ``error`` event from the model, as a LiveKit realtime plugin
        reports its own: a failure the provider marks retryable (an :class:`APIError` with
        ``retryable``) is reported as recoverable and the connection is made again after
        0.1 s, then after the model's ``conn_options.retry_interval``, up to its
        ``max_retry`` times in a row (a connection that went live starts the count again).
        Any other failure, or the one after the last retry, is final: the link is
        :attr:`failed` (no session will be live: a speech waiting for one ends quietly) and
        the error is reported as unrecoverable, which closes the session with reason
        ``error``. A failure while the connection was ending anyway (a pause, a handoff, the
        close) is only logged.

        ``started`` once the first connection is live, or when none is to be made (another
        agent took over first). A first connection that fails for good holds the activity's
        start: the close its failure asked for cancels that start, as any close during a
        start does (the agent never enters).

        Cancellation: cancelling it closes the open session.
        """
        activity = self._activity
        self._task_status = task_status
        del task_status  # kept only until started (it holds the nursery it started in)
        failures = 0  # in a row, since a connection was last live
        try:
            while not self._ended.is_set() and self.failed is None:
                await activity.scheduling_open.wait()
                if self._ended.is_set():
                    break
                went_live, error = await self._one_connection()
                if error is None:
                    continue  # ended by a pause or a handoff
                if not self._will_be_live:  # it was ending anyway: a pause or a handoff
                    logger.warning("the realtime session failed as it was ending",
                                   exc_info=error)
                    continue
                failures = 1 if went_live else failures + 1
                if went_live:
                    self.end_responses("the realtime connection failed")
                delay = self._retry_delay(error, failures)
                if delay is None:
                    self._fail(error, failures)
                    break
                logger.warning("the realtime connection failed (%d in a row), retrying in "
                               "%.1f s", failures, delay, exc_info=error)
                self._activity.session.conversation.report_error(error, self.model)
                # the wait belongs to the next connection: a pause or a handoff cuts it
                with trio.CancelScope() as self._connection:
                    await trio.sleep(delay)
        finally:
            self._detach()
        if self.failed is not None and self._task_status is not None:
            # the activity cannot start without its session: the close that the failure
            # asked for (reported above) cancels its start
            await trio.sleep_forever()
        self._started()

    def _started(self) -> None:
        """Tell ``run``'s caller it started, the first time only."""
        status, self._task_status = self._task_status, None
        if status is not None:
            status.started()

    async def _one_connection(self) -> tuple[bool, Exception | None]:
        """One connection, from its first step to its end: opened, sent the agent's state,
        live until a pause, a handoff or the close ends it, or until it fails.

        Returns:
            Whether it went live, and its failure (None when it was ended).

        Cancellation: the connection ends (the session, open or not, is closed); a failure
        that comes with the cancellation is only logged.
        """
        activity = self._activity
        self._closed = trio.Event()
        went_live = False
        try:
            async with trio.open_nursery() as connection:
                self._connection = connection.cancel_scope
                connection.start_soon(_cancel_when, activity.scheduling_closed, connection)
                rt = await self._connect(connection)
                went_live = True
                self._started()
                await self._consume_events(rt)
                # the server ended the session (its events ended, no error): a connection
                # closed unexpectedly, retried as the OpenAI plugin retries one, not a dead
                # session to stay on, deaf and mute
                raise APIConnectionError("the realtime server ended the session",
                                         retryable=True)
        except Exception as failure:  # the connection's group of errors
            return went_live, _first_error(failure)
        except BaseExceptionGroup as group:  # errors and a cancellation: the cancellation wins
            errors, cancelled = group.split(Exception)
            if errors is not None:
                logger.warning("the realtime session failed as it was cancelled",
                               exc_info=_first_error(errors))
            assert cancelled is not None  # else the group would be an ExceptionGroup
            raise cancelled from None
        finally:
            self._detach()
            self._closed.set()
        return went_live, None

    def _retry_delay(self, error: Exception, failures: int) -> float | None:
        """The wait before connecting again after the ``failures``-th failure in a row, or
        None when ``error`` is final: as the OpenAI plugin's ``_main_task``, only a
        retryable :class:`APIError` is retried, up to ``max_retry`` times, the first at once
        (0.1 s), the others after ``retry_interval``."""
        options = getattr(self.model, "conn_options", DEFAULT_API_CONNECT_OPTIONS)
        if not (isinstance(error, APIError) and error.retryable) \
                or failures > options.max_retry:
            return None
        return 0.1 if failures == 1 else options.retry_interval

    def _fail(self, error: Exception, failures: int) -> None:
        """The connection failed for good: no session will be live; report the error as
        unrecoverable (the session closes)."""
        final: Exception = error
        if isinstance(error, APIError) and error.retryable:  # the retries are over
            final = APIConnectionError(
                f"the realtime connection failed after {failures} attempts: {error}",
                retryable=False)
            final.__cause__ = error
        self.failed = final
        self._live_changed.notify()  # the speeches waiting for a session end quietly
        logger.error("the realtime connection failed: %r", final, exc_info=error)
        self._activity.session.conversation.report_error(final, self.model)

    async def _connect(self, connection: trio.Nursery) -> RealtimeSession:
        """Open a session in ``connection``, send it the agent's state, make it the live one.

        A part of the state the server refuses (a :class:`RealtimeError`) is logged and the
        session goes live all the same, as LiveKit's ``_update_session`` does; any other
        error fails the connection.

        Cancellation: the connection ends (the session, open or not, is closed).
        """
        async def hold_session(task_status: trio.TaskStatus[RealtimeSession]) -> None:
            async with self.model.session() as rt:
                sync = RealtimeSync(lambda part: self._send_part(rt, part))
                self._sync = sync
                try:
                    await sync.send_all()
                    self.session, self._gone = rt, trio.Event()
                    self._live_changed.notify()
                    task_status.started(rt)
                    await sync.run()
                finally:
                    self._sync = None
                    self._detach()  # before the session closes: nothing reaches it after

        rt: RealtimeSession = await connection.start(hold_session)
        return rt

    def _detach(self) -> None:
        self.session = None
        self._gone.set()  # calls still in flight on it are cancelled
        self._connection.cancel()  # the connection ends now, wherever it is
        self._live_changed.notify()

    @property
    def _will_be_live(self) -> bool:
        """A session is live or will be: no other agent took over, the activity is not
        paused and the connection did not fail for good (a connection is open or about to
        open; each one that ends while this holds is followed by the next)."""
        return (not self._ended.is_set() and self._activity.scheduling_open.is_set()
                and self.failed is None)

    async def wait_live(self) -> tuple[RealtimeSession, RealtimeSync]:
        """Wait until a session is live (one connecting is waited for); return it and its
        sync.

        Raises:
            RealtimeUnavailable: no session is live or connecting: another agent took over,
                the activity is paused (or its link is closing), or the connection failed
                for good, also while waiting.

        Cancellation: a checkpoint only.
        """
        await trio.lowlevel.checkpoint()
        while self.session is None:
            if not self._will_be_live:
                raise RealtimeUnavailable("the agent has no live realtime session")
            await self._live_changed.wait()  # each connection ends or goes live through here
        assert self._sync is not None  # set before a session goes live, reset after
        rt: RealtimeSession = self.session
        return rt, self._sync

    def end(self) -> None:
        """Another agent takes over: nothing more reaches the session, which closes now."""
        self._ended.set()
        self._detach()

    async def suspend(self) -> None:
        """The activity paused: detach now and return once the session is closed.

        Cancellation: the link stays detached; the session closes on its own.
        """
        self._detach()
        await self._closed.wait()

    def agent_changed(self, *parts: Part) -> None:
        """The agent changed ``parts`` of its state: the live (or connecting) session gets
        them; without one, the next connection sends the agent's whole state."""
        if self._sync is not None:
            self._sync.mark_stale(*parts)

    async def _send_part(self, rt: RealtimeSession, part: Part) -> None:
        agent = self._activity.agent
        if part == "instructions":
            await rt.update_instructions(render_instructions(agent.instructions, "audio"))
        elif part == "tools":
            await rt.update_tools(self._activity.tools())
        else:
            await rt.update_chat_ctx(agent.live_chat_ctx.copy(exclude_instructions=True))

    async def wait_synced(self) -> None:
        """Wait until the live session (once one connecting is live) has every change the
        agent made so far.

        Raises:
            RealtimeUnavailable: there is no live session and none connecting, or it went
                away meanwhile.

        Cancellation: a checkpoint; the changes are sent all the same.
        """
        _, sync = await self.wait_live()
        await self.call(lambda rt: sync.wait_synced())

    # -- calls ---------------------------------------------------------------------------------
    async def call(self, call: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``call(session)`` on the live session, cancelled if that session stops being
        live meanwhile (a handoff, a pause or close): no call outlives its session.

        Raises:
            RealtimeUnavailable: there is no live session, or it went away during the call.
        """
        rt, gone = self.session, self._gone
        if rt is None:
            raise RealtimeUnavailable("the agent has no live realtime session")
        result: list[T] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_when, gone, nursery)
            result.append(await call(rt))
            nursery.cancel_scope.cancel()
        if not result:
            raise RealtimeUnavailable("the realtime session closed during the call")
        return result[0]

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        rt = self.session
        if rt is not None:
            rt.push_audio(frame)

    async def push_tool_outputs(self) -> None:
        """Tool outputs (committed to the agent's context) go to this activity's own session,
        never another one: its chat context is stale, the session's sync sends it (also to a
        session still connecting, which may have sent the context before them); returns once
        the live session has it.

        Cancellation: the outputs may not have reached the server yet; the sync sends them
        all the same, and the next connection starts from the agent's whole context.
        """
        self.agent_changed("chat_ctx")
        try:
            await self.wait_synced()
        except RealtimeUnavailable:
            pass  # paused, handed over or closing: the next session starts from the context

    # -- responses -----------------------------------------------------------------------------
    @contextmanager
    def receiving(self) -> Iterator[RealtimeResponse]:
        """The scope of one response being received; a reconnect or a newer turn ends it."""
        response = RealtimeResponse(stall_timeout=self.response_stall_timeout)
        self._responses.add(response)
        try:
            with response:
                yield response
        finally:
            self._responses.discard(response)

    def end_responses(self, reason: str) -> None:
        """End every response still being received (what they received still plays)."""
        for response in list(self._responses):
            response.end(reason)

    # -- server events -------------------------------------------------------------------------
    def _labelled(self, metrics: RealtimeModelMetrics) -> RealtimeModelMetrics:
        """``metrics`` with the model's label and metadata where the session left them out."""
        if not metrics.label:
            metrics.label = model_label(self.model)
        if metrics.metadata is None:
            metrics.metadata = model_metadata(self.model)
        return metrics

    async def _consume_events(self, rt: RealtimeSession) -> None:
        async for ev in rt.events():
            self._on_event(ev)

    def _on_event(self, ev: RealtimeEvent) -> None:
        activity = self._activity
        session = activity.session
        now = trio.current_time()
        if ev.type == "input_speech_started":
            session.conversation.set_user_state("speaking", now)
            current = activity.current_speech
            if (self.server_turn_detection and current is not None
                    and current.allow_interruptions and not current.interrupted):
                current.interrupt()
        elif ev.type == "input_speech_stopped":
            session.conversation.set_user_state("listening", now)
        elif ev.type == "input_audio_transcription_completed":
            session.conversation.emit("user_input_transcribed", UserInputTranscribedEvent(
                transcript=ev.transcript, is_final=ev.is_final, item_id=ev.item_id))
            if ev.is_final and ev.transcript:
                activity.commit_item(ChatMessage(
                    role="user", content=[ev.transcript], id=ev.item_id,
                    created_at=now if ev.turn_started_at is None else ev.turn_started_at))
        elif ev.type == "generation_created":
            if ev.user_initiated:
                return  # a request's response: its call returned it, or it was abandoned
            if not activity.takes_new_turns:
                # ignored while paused, draining or once a handoff was requested (reference
                # 7.4): as in LiveKit, no speech starts and none of its calls runs
                return
            handle = SpeechHandle(allow_interruptions=activity.allow_interruptions)
            activity.start_speech(handle, ReplyRequest(
                chat_ctx=ChatContext(), tools=activity.tools(), generation=ev),
                user_initiated=False)
            activity.schedule(handle)
        elif ev.type == "realtime_model_metrics":
            session.emit_metrics(self._labelled(ev))
        elif ev.type == "session_reconnected":
            self.end_responses("the realtime session reconnected")
            self.agent_changed()  # the new connection gets the agent's state again
        elif ev.type == "error":
            if ev.recoverable:
                session.conversation.emit("error", ErrorEvent(error=ev.error, source=self.model))
            else:
                session.conversation.report_error(ev.error, self.model)
