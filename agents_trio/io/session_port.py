"""What room I/O uses of a session: the ports it plugs its audio and text into, and the few
calls it makes (``on``/``off``, ``shutdown``, ``interrupt``, ``generate_reply``), and where it
reads how far the session is in its life (``state``, re-read on each of its ``events()``).

``io`` never imports the session: ``AgentSession`` satisfies :class:`RoomSession`
structurally, and so does any object with this surface (a test double, a remote proxy).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from ..events import CloseReason
from .audio import AudioInput, AudioOutput, TextOutput

__all__ = ["ReplyHandle", "RoomSession", "SessionEvents", "SessionInputPort",
           "SessionOutputPort", "wait_session_running", "wait_session_started"]

# the session's states (``SessionState`` values) from the moment ``start()`` was called, and
# from the moment its agent entered (or it closed without)
_STARTED_STATES = frozenset({"starting", "running", "closing", "closed"})
_RAN_STATES = frozenset({"running", "closing", "closed"})


class SessionInputPort(Protocol):
    """``session.input``: where the user's audio comes from."""

    audio: AudioInput | None


class SessionOutputPort(Protocol):
    """``session.output``: where the agent's voice and transcription go."""

    audio: AudioOutput | None
    transcription: TextOutput | None


class ReplyHandle(Protocol):
    """A reply being generated (``AgentSession.generate_reply`` returns a ``SpeechHandle``)."""

    def add_done_callback(self, callback: Callable[[Any], object]) -> None: ...

    def remove_done_callback(self, callback: Callable[[Any], object]) -> None: ...


class SessionEvents(Protocol):
    """``session.events()``: every event the session emits, until it closes."""

    def __aiter__(self) -> SessionEvents: ...

    async def __anext__(self) -> object: ...

    async def aclose(self) -> None:
        """End the iteration (unsubscribe).

        Cancellation: a checkpoint; the iteration ends even if cancelled.
        """


class RoomSession(Protocol):
    """The session as room I/O sees it."""

    @property
    def input(self) -> SessionInputPort: ...

    @property
    def output(self) -> SessionOutputPort: ...

    @property
    def state(self) -> enum.Enum: ...

    def events(self) -> SessionEvents: ...

    def on(self, name: str, callback: Callable[[Any], object]) -> object: ...

    def off(self, name: str, callback: Callable[[Any], object]) -> None: ...

    def shutdown(self, *, drain: bool = ..., reason: CloseReason = ...) -> None: ...

    def interrupt(self) -> Awaitable[object]: ...

    def generate_reply(self, *, user_input: str | None = ...) -> ReplyHandle: ...


async def wait_session_started(session: RoomSession) -> None:
    """Wait until ``session.start()`` was called (the session is starting, running, or
    closed since): from then on ``shutdown()`` is heard (before, it is ignored, as in
    LiveKit). A session closed without starting ends the wait too.

    Cancellation: a checkpoint; nothing else happens.
    """
    await _wait_for_state(session, _STARTED_STATES)


async def wait_session_running(session: RoomSession) -> bool:
    """Wait until ``session`` runs (its agent entered): True; False when it is closing or
    closed instead (it may never have run).

    Cancellation: a checkpoint; nothing else happens.
    """
    return await _wait_for_state(session, _RAN_STATES) == "running"


async def _wait_for_state(session: RoomSession, states: frozenset[str]) -> str:
    """Wait until ``session.state`` is one of ``states`` (its value, returned), re-read on
    every event the session emits: the start emits one as it begins (the first agent's
    handoff item), the run another (the agent state ``listening``), the close a last one.
    A session closed before it started emits no more: its events end, and so does the wait.
    """
    events = session.events()   # subscribed before the first read: no event is missed
    try:
        if session.state.value not in states:
            async for _ in events:
                if session.state.value in states:
                    return str(session.state.value)
        await trio.lowlevel.checkpoint()
        return str(session.state.value)
    finally:
        await events.aclose()
