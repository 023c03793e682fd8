"""Conversation: the state a session's activities share, owned by one object.

The session creates one ``Conversation`` and hands it to every activity it runs. It holds
what belongs to the conversation rather than to any one agent: the history, the event
fan-out, the agent's and the user's state, the active ``session.run()`` and what it records,
the count of model errors, the forwarding of the agent's transcription, and the parking lot
that wakes whoever waits for the conversation to progress.

It knows nothing of activities or of the session: the session passes in the few decisions
that are its own (what an error's source is, what to do when errors pile up, what happens
around a state change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import trio

from ._errors import APIError
from .chat import AgentHandoff, ChatContext, ChatItem, ChatMessage
from .events import (AgentState, AgentStateChangedEvent, ConversationItemAddedEvent, ErrorEvent,
                     SpeechCreatedEvent, UserState, UserStateChangedEvent)
from .nurseries import EventFanout, Flag, Pipe, Wakeup
from .run_result import RunHold, RunResult
from .speech_handle import SpeechHandle

logger = logging.getLogger("agents_trio")

#: The id of the instructions an AgentTask records in its own context, never in the history.
_TASK_INSTRUCTIONS_ID = "lk.agent_task.instructions"


class TextSink(Protocol):
    """Where the agent's transcription goes (``session.output.transcription``)."""

    async def capture_text(self, text: str) -> None:
        """Add ``text`` to the current segment.

        Cancellation: the forwarding cancels it only when the session stops delivering the
        transcription (no ``flush`` follows); an implementation may drop that text but must
        stay usable.
        """
        ...

    def flush(self) -> None: ...


class ErrorPolicy(Protocol):
    """The session's rules for unrecoverable model errors."""

    def classify(self, source: object) -> tuple[str, int]:
        """The kind of ``source`` (``"llm"``, ``"tts"``, …) and how many errors of that kind
        in a row are tolerated."""
        ...

    def give_up(self, error: BaseException) -> None:
        """Too many errors of one kind: close the session."""
        ...


class Conversation:
    """History, events, agent and user state, the active run, errors and transcription.

    Args:
        errors: The session's error policy.
        on_agent_speaking: Called when the agent starts speaking, before the state event.
        on_state_changed: Called after every agent or user state change (the away timer).
    """

    def __init__(self, *, errors: ErrorPolicy, on_agent_speaking: Callable[[], None],
                 on_state_changed: Callable[[], None]) -> None:
        self.events = EventFanout()
        self.history = ChatContext()
        self._agent_state: AgentState = "initializing"
        self._user_state: UserState = "listening"
        self._errors = errors
        self._on_agent_speaking = on_agent_speaking
        self._on_state_changed = on_state_changed
        self._error_counts: dict[str, int] = {}
        self._run: RunResult[object] | None = None
        self._progress = Wakeup()
        self._transcripts: TranscriptForwarding | None = None  # once the session runs

    # -- events ---------------------------------------------------------------------------
    def emit(self, name: str, event: object) -> None:
        self.events.emit(name, event)

    # -- agent and user state -------------------------------------------------------------
    @property
    def agent_state(self) -> AgentState:
        return self._agent_state

    @property
    def user_state(self) -> UserState:
        return self._user_state

    def set_agent_state(self, state: AgentState) -> None:
        """Move the agent to ``state`` (no event when it is already there)."""
        if state == self._agent_state:
            return
        old, self._agent_state = self._agent_state, state
        if state == "speaking":
            # the models work again: their error counts start over
            self._error_counts.pop("llm", None)
            self._error_counts.pop("tts", None)
            self._on_agent_speaking()
        self.emit("agent_state_changed", AgentStateChangedEvent(old_state=old, new_state=state))
        self._on_state_changed()
        self.progressed()  # waiters on the agent's state look again

    def refresh(self) -> None:
        """A fact the state listeners read changed (a tool started or ended)."""
        self._on_state_changed()

    def reset_agent_state(self) -> None:
        """Back to ``initializing`` without an event (the session closed)."""
        self._agent_state = "initializing"

    def set_user_state(self, state: UserState, created_at: float) -> None:
        """Move the user to ``state`` (no event when they are already there)."""
        if state == self._user_state:
            return
        old, self._user_state = self._user_state, state
        self.emit("user_state_changed", UserStateChangedEvent(
            old_state=old, new_state=state, created_at=created_at))
        self._on_state_changed()

    # -- the active run -------------------------------------------------------------------
    @property
    def active_run(self) -> RunResult[object] | None:
        """The ``session.run()`` in progress, if any."""
        run = self._run
        return run if run is not None and not run.done() else None

    def hold_run(self) -> RunHold:
        """Keep the active run open until the hold is released (a hold of nothing when no
        run is active)."""
        run = self.active_run
        return run.hold() if run is not None else RunHold()

    def begin_run(self, run: RunResult[object]) -> None:
        """Make ``run`` the active run (the previous one is done)."""
        self._run = run

    def fail_run(self, error: BaseException) -> None:
        """End the active run with ``error`` (the session closes)."""
        run = self.active_run
        if run is not None:
            run.fail(error)

    def speech_created(self, handle: SpeechHandle, *, user_initiated: bool = True) -> None:
        run = self.active_run
        if run is not None:
            run.watch(handle)
        self.emit("speech_created", SpeechCreatedEvent(
            speech_handle=handle, source=handle.source, user_initiated=user_initiated))

    # -- history --------------------------------------------------------------------------
    def commit(self, item: ChatItem, handle: SpeechHandle | None = None, *,
               old_agent: object = None, new_agent: object = None) -> None:
        """Add ``item`` to the history, to ``handle``'s items and to the active run."""
        if item.id != _TASK_INSTRUCTIONS_ID:
            self.history.insert(item)
        if handle is not None:
            handle.add_item(item)
        if item.type != "function_call":  # calls are recorded when they start executing
            self.record_run_item(item, handle, old_agent=old_agent, new_agent=new_agent)
        if isinstance(item, (ChatMessage, AgentHandoff)):
            self.emit("conversation_item_added", ConversationItemAddedEvent(item=item))

    def record_run_item(self, item: ChatItem, handle: SpeechHandle | None, *,
                        old_agent: object = None, new_agent: object = None) -> None:
        """Record on the active run the items of the speeches it watches, and handoffs."""
        run = self.active_run
        if run is not None and (handle is None or run.watches(handle)):
            run.record_item(item, old_agent=old_agent, new_agent=new_agent)

    # -- errors ---------------------------------------------------------------------------
    def report_error(self, error: BaseException, source: object) -> None:
        """Emit ``error``; too many unrecoverable ones of a kind close the session."""
        self.emit("error", ErrorEvent(error=error, source=source))
        if isinstance(error, APIError) and error.recoverable:
            return
        kind, limit = self._errors.classify(source)
        self._error_counts[kind] = self._error_counts.get(kind, 0) + 1
        if self._error_counts[kind] > limit:
            self._errors.give_up(error)

    def forgive(self, kind: str) -> None:
        """Errors of ``kind`` start over (the source works again)."""
        self._error_counts.pop(kind, None)

    # -- progress -------------------------------------------------------------------------
    def progressed(self) -> None:
        """A speech, a tool or an on_enter finished, or the current activity changed."""
        self._progress.notify()

    async def wait_until(self, settled: Callable[[], bool]) -> None:
        """Wait until ``settled()`` holds, looking again at each progress.

        Cancellation: a checkpoint only; nothing changes.
        """
        while not settled():
            await self._progress.wait()

    # -- transcription --------------------------------------------------------------------
    def open_transcription(self, nursery: trio.Nursery,
                           output: Callable[[], TextSink | None]) -> None:
        """Deliver the agent's transcription from now on, in order, to ``output()``: each
        segment by a task of ``nursery``, which must outlive the session's work (so texts
        sent while closing are delivered too). The texts sent are already what the agent's
        transcription node made of its replies (the speech runs the node)."""
        self._transcripts = TranscriptForwarding(nursery, output,
                                                 self.report_transcription_error)

    def close_transcription(self) -> None:
        """No more texts: a segment still open ends with what it got."""
        if self._transcripts is not None:
            self._transcripts.close()

    def send_transcription(self, text: str, *, enabled: bool, final: bool = True) -> None:
        """Queue ``text`` for the transcription output (dropped when it is disabled).

        ``final=False`` sends part of a segment (the transcript synchronizer releases a
        segment word by word): the output gets it at once, and the segment ends (``flush``)
        with the next ``final`` text, which may be empty.
        """
        if self._transcripts is not None and enabled and (text or final):
            self._transcripts.send(text, final=final)

    async def wait_transcription_delivered(self) -> None:
        """Wait until every segment sent so far was delivered (or failed).

        Cancellation: a checkpoint; delivery goes on.
        """
        if self._transcripts is not None:
            await self._transcripts.wait_delivered()
        else:
            await trio.lowlevel.checkpoint()

    def cancel_transcription(self) -> None:
        """Stop delivering: the segments in progress are cancelled (no ``flush``)."""
        if self._transcripts is not None:
            self._transcripts.cancel()

    def report_transcription_error(self, error: Exception, source: object) -> None:
        """The agent's transcription node or the transcription output failed: logged and
        emitted as an ``error`` event from ``source``; it never closes the session."""
        logger.error("the agent's transcription failed", exc_info=error)
        self.emit("error", ErrorEvent(error=error, source=source))


class TranscriptForwarding:
    """The agent's transcription on its way to the output, one segment at a time.

    A segment begins with its first text: its output is taken then (none: the segment is
    dropped), and a task of the borrowed nursery delivers it, once the segment before it was
    delivered; its texts reach that task through a channel, and a ``final`` text ends it.
    Between segments nothing runs: no task waits for the next text. Each delivery runs in a
    cancel scope of its own, so :meth:`cancel` stops them all while the nursery lives on.
    """

    def __init__(self, nursery: trio.Nursery, output: Callable[[], TextSink | None],
                 on_error: Callable[[Exception, TextSink], None]) -> None:
        self._nursery = nursery
        self._output = output
        self._on_error = on_error
        self._parts: Pipe[str] | None = None  # the open segment's
        self._skipping = False  # no output when the open segment began: drop it
        self._delivered: Flag | None = None  # the last segment's
        self._deliveries: set[trio.CancelScope] = set()
        self._closed = False

    def send(self, text: str, *, final: bool) -> None:
        """Add ``text`` to the open segment (beginning one if none is); ``final`` ends it.
        Ignored once closed."""
        if self._closed:
            return
        if self._parts is None and not self._skipping:
            self._begin_segment()
        if self._parts is not None and text:
            self._parts.send_nowait(text)
        if final:
            self._skipping = False
            self._end_segment()

    def close(self) -> None:
        """No more texts; a segment still open ends with what it got. Idempotent."""
        self._closed = True
        self._end_segment()

    async def wait_delivered(self) -> None:
        """Wait until the last segment begun so far was delivered (or failed, or cancelled).

        Cancellation: a checkpoint; delivery goes on.
        """
        if self._delivered is None:
            await trio.lowlevel.checkpoint()
        else:
            await self._delivered.wait()

    def cancel(self) -> None:
        """Close (:meth:`close`: no later segment begins) and cancel every delivery in
        progress. Idempotent."""
        self.close()
        for scope in self._deliveries:
            scope.cancel()

    def _begin_segment(self) -> None:
        sink = self._output()
        if sink is None:
            self._skipping = True
            return
        self._parts = parts = Pipe[str]()
        before, self._delivered = self._delivered, Flag()
        scope = trio.CancelScope()
        self._deliveries.add(scope)
        self._nursery.start_soon(self._deliver, scope, sink, parts, before, self._delivered)

    def _end_segment(self) -> None:
        parts, self._parts = self._parts, None
        if parts is not None:
            parts.close()

    async def _deliver(self, scope: trio.CancelScope, sink: TextSink, parts: Pipe[str],
                       before: Flag | None, delivered: Flag) -> None:
        try:
            with scope:
                if before is not None:
                    await before.wait()  # segments reach the output in order
                try:
                    async for text in parts:
                        await sink.capture_text(text)
                    sink.flush()
                except Exception as e:  # a failing output loses this segment only
                    self._on_error(e, sink)
        finally:
            self._deliveries.discard(scope)
            delivered.set()

