"""What each remote-session request does to the session it serves.

A :class:`SessionService` is the request handler of a host's connections: cheap requests are
answered inline (history pages, agent info, state, subscriptions), ``wait_for_ready`` waits
for the session's first agent, and ``run`` goes through one turn runner so that the turns of
every client reach the session one at a time, in arrival order; a turn arriving interrupts
the agent at once (a barge-in), so the turn being played ends and the new one follows.

What a request may do is derived from the session each time, never remembered: the session's
phase (starting, running, closing: :meth:`SessionService.phase`) says whether an agent runs,
and the current activity says whether it takes a new turn now. An agent that drains (a
handoff, or ``shutdown(drain=True)``) is not barged in on: it finishes its words, and the
turn waits for the next agent (or fails with the close).
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import trio

from ..instructions import render_instructions
from .._errors import SessionClosedError
from ..nurseries import single_leaf
from ..session import SessionState
from ..tools import FunctionTool
from ..toolsets import flatten_tools
from .wire import (DEFAULT_MAX_FRAME_SIZE, AgentInfo, AgentInfoReply, GetAgentInfo,
                   GetChatHistory, GetSessionState, Message, ReadyReply, RequestMessage, Run,
                   RunReply, SessionStateInfo, SessionStateReply, SpeechInfo, Subscribe,
                   SubscribedReply, ToolInfo, Unsubscribe, UnsubscribedReply, WaitForReady,
                   WireItem, to_wire_item)
from ._connection import Connection, Refusal
from ._history import history_page

if TYPE_CHECKING:
    from ..session import AgentSession


logger = logging.getLogger("agents_trio.remote")


class Phase(enum.Enum):
    """Where the served session is, as the requests see it."""

    STARTING = "starting"   # no agent runs yet
    RUNNING = "running"
    CLOSED = "closed"       # closing or closed


class _Turn:
    """One ``run`` request on its way through the turn runner."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.done = trio.Event()
        self.items: list[WireItem] = []
        self.refusal: Refusal | None = None
        self.abandoned = False


class SessionService:
    """Answers requests against ``session``; :meth:`run_turns` must run while it serves.

    Args:
        max_frame_size: The reply limit: history pages are cut to fit it.
    """

    def __init__(self, session: AgentSession, *,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._session = session
        self._max_frame_size = max_frame_size
        # woken by the session's events; waiters look at phase() again (nothing is latched:
        # a session started before the host served has no event for the host to see)
        self._progressed = trio.lowlevel.ParkingLot()
        self._turns_send, self._turns_recv = trio.open_memory_channel[_Turn](math.inf)
        self.queued_turns = 0

    def note_event(self, event: object) -> None:
        """The session emitted ``event``: its phase may have changed (it starts running when
        its agent state first moves, and closes with its ``close`` event)."""
        self._progressed.unpark_all()

    def phase(self) -> Phase:
        state = self._session.state
        if state is SessionState.RUNNING:
            return Phase.RUNNING
        if state in (SessionState.CLOSING, SessionState.CLOSED):
            return Phase.CLOSED
        return Phase.STARTING

    async def run_turns(self) -> None:
        """Play the queued turns one at a time; skips those nobody waits for any more.

        Cancellation: the turn being played is cancelled with it (``session.run`` is).
        """
        async for turn in self._turns_recv:
            if not turn.abandoned:
                await self._play(turn)
            self.queued_turns -= 1

    def _barge_in(self) -> None:
        """Typing while the agent talks is a barge-in, when the agent takes the turn: one
        that drains (a handoff, or the close) finishes its words, and the turn waits for the
        next agent (or fails with the close) without having cut another client's reply."""
        activity = self._session.activity
        if activity is None or not activity.takes_new_turns:
            return
        try:
            self._session.interrupt()
        except RuntimeError:
            pass  # nothing playing, or the speech does not allow interruptions

    async def _play(self, turn: _Turn) -> None:
        session = self._session
        try:
            self._barge_in()  # whatever started since the turn arrived
            result = await session.run(user_input=turn.text)
            turn.items = _wire_items(ev.item for ev in result.events)
        except SessionClosedError as e:
            turn.refusal = Refusal("session_closed", f"the session closed during the turn ({e})",
                                   type(e).__name__)
        except Exception as e:  # noqa: BLE001 - any failure of the turn is the client's answer
            error = single_leaf(e)
            turn.refusal = Refusal("run_failed", str(error) or type(error).__name__,
                                   type(error).__name__)
        turn.done.set()

    # -- requests (called by the connections) -------------------------------------------------
    def answer_now(self, conn: Connection, request: RequestMessage) -> Message | None:
        if isinstance(request, GetChatHistory):
            return history_page(self._session.history.items, request, self._max_frame_size)
        if isinstance(request, GetAgentInfo):
            return AgentInfoReply(id=request.id, agent=self._agent_info())
        if isinstance(request, GetSessionState):
            return SessionStateReply(id=request.id, state=self._state_info())
        if isinstance(request, Subscribe):
            conn.subscribed = True
            conn.subscription = None if request.events is None else frozenset(request.events)
            return SubscribedReply(id=request.id, events=request.events)
        if isinstance(request, Unsubscribe):
            conn.subscribed = False
            return UnsubscribedReply(id=request.id)
        if isinstance(request, WaitForReady):
            return None if self.phase() is Phase.STARTING else self._ready_reply(request.id)
        if isinstance(request, Run):
            if not request.text.strip():
                raise Refusal("bad_request", "run needs a non-empty text")
            self._require_ready()
            return None
        raise Refusal("unknown_message_type", f"unhandled request {request.kind!r}")

    async def answer(self, conn: Connection, request: RequestMessage) -> Message:
        """Wait for the session to be ready, or for a queued turn to settle.

        Cancellation: a turn that had not started is skipped; one already running finishes
        in the session (its reply is dropped).
        """
        if isinstance(request, WaitForReady):
            while self.phase() is Phase.STARTING:
                await self._progressed.park()
            return self._ready_reply(request.id)
        assert isinstance(request, Run)
        turn = _Turn(request.text)
        self.queued_turns += 1
        # interrupt the agent now, not when the turn's time comes in the queue: the turn being
        # played then ends (interrupted) and this one follows, as typed chat does in LiveKit
        self._barge_in()
        self._turns_send.send_nowait(turn)
        try:
            await turn.done.wait()
        finally:
            turn.abandoned = not turn.done.is_set()  # a turn nobody waits for is skipped
        if turn.refusal is not None:
            raise turn.refusal
        return RunReply(id=request.id, items=turn.items)

    def _require_ready(self) -> None:
        phase = self.phase()
        if phase is Phase.STARTING:
            raise Refusal("not_ready", "the session has not started an agent yet "
                                       "(wait_for_ready first)")
        if phase is Phase.CLOSED:
            raise _closed_refusal()

    def _ready_reply(self, request_id: int) -> ReadyReply:
        self._require_ready()
        return ReadyReply(id=request_id, agent_id=self._session.current_agent.id)

    def _agent_info(self) -> AgentInfo:
        self._require_ready()
        agent = self._session.current_agent
        tools = [ToolInfo(name=t.name, description=t.description or "",
                          parameters=dict(getattr(t, "parameters_schema", None) or {}))
                 for t in flatten_tools([*getattr(self._session, "tools", []), *agent.tools])
                 if isinstance(t, FunctionTool)]
        return AgentInfo(id=agent.id, label=getattr(agent, "label", type(agent).__name__),
                         instructions=render_instructions(agent.instructions), tools=tools)

    def _state_info(self) -> SessionStateInfo:
        session = self._session
        speech = session.current_speech
        ready = self.phase() is Phase.RUNNING
        return SessionStateInfo(
            agent_state=session.agent_state, user_state=session.user_state,
            agent_id=session.current_agent.id if ready else None,
            current_speech=None if speech is None else SpeechInfo(
                id=speech.id, source=speech.source,
                allow_interruptions=speech.allow_interruptions,
                interrupted=speech.interrupted, done=speech.done()),
            ready=ready, time=trio.current_time())


def _closed_refusal() -> Refusal:
    return Refusal("session_closed", "the session is closing", SessionClosedError.__name__)


def _wire_items(items: Iterable[Any]) -> list[WireItem]:
    """The wire form of chat items; an item type the wire does not know is left out."""
    out = []
    for item in items:
        try:
            out.append(to_wire_item(item))
        except (KeyError, AttributeError, TypeError):
            logger.debug("chat item %r has no wire form; left out", item)
    return out
