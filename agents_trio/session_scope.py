"""Where the calls of a session's ``AsyncToolset`` run: the session's own nursery.

One :class:`SessionScope` per session. Its calls run in the session's work nursery (the
session closing cancels them), so a handoff neither cancels nor waits for these
calls. Their background reports go through a :class:`BackgroundTools` whose host is
:class:`CurrentAgent`: the session's current agent at each moment, so reports, deferred
replies, ``foreground()`` and fillers follow handoffs and AgentTasks (LiveKit's
session-scoped executor). Their duplicates are judged among themselves (one ``ToolCalls``).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, cast

import trio

from ._errors import SessionClosedError
from .background_tools import BackgroundHost, BackgroundTools
from .chat import ChatItem
from .conversation import Conversation
from .events import ToolExecutionUpdatedEvent
from .fillers import Filler
from .floor import Floor
from .models import ToolChoice
from .run_result import RunHold
from .speech_handle import SpeechHandle
from .tool_calls import ToolCalls, session_calls
from .tool_handling import AsyncToolOptions

__all__ = ["CurrentAgent", "SessionScope", "host_session_scopes", "session_scope"]


class ScopedSession(Protocol):
    """What the scope reads from its session."""

    @property
    def activity(self) -> object: ...

    @property
    def conversation(self) -> Conversation: ...

    @property
    def floor(self) -> Floor: ...

    @property
    def async_tool_options(self) -> AsyncToolOptions: ...

    @property
    def closing(self) -> bool: ...


class CurrentAgent:
    """A :class:`BackgroundHost` that is the session's current agent whenever it is used."""

    def __init__(self, session: ScopedSession) -> None:
        # weak: the scope is found through a weak-keyed table, which a strong reference back
        # to its key would keep alive forever
        self._session_ref = weakref.ref(session)

    @property
    def _session(self) -> ScopedSession:
        session = self._session_ref()
        if session is None:
            raise SessionClosedError("the session is gone")
        return session

    def _current(self) -> BackgroundHost:
        current = self._session.activity
        if current is None or self._session.closing:
            raise SessionClosedError("the session is closing")
        return cast(BackgroundHost, current)  # the session's Activity is a BackgroundHost

    @property
    def accepts_tool_replies(self) -> bool:
        return not self._session.closing and self._current().accepts_tool_replies

    @property
    def tool_options(self) -> AsyncToolOptions:
        return self._session.async_tool_options

    @property
    def scheduling_paused(self) -> bool:
        current = self._session.activity
        return current is not None and cast(BackgroundHost, current).scheduling_paused

    def commit_item(self, item: ChatItem, handle: SpeechHandle | None = None) -> None:
        self._current().commit_item(item, handle)

    def emit_tool_update(self, event: ToolExecutionUpdatedEvent) -> None:
        self._session.conversation.emit("tool_execution_updated", event)

    def last_item_id(self) -> str | None:
        return self._current().last_item_id()

    async def wait_for_floor(self) -> None:
        """Wait until the current agent is idle and the floor is free (follows handoffs).

        Cancellation: a checkpoint only.

        Raises:
            SessionClosedError: the session closes.
        """
        await self._current().wait_for_current_floor()

    async def wait_resumed(self) -> None:
        """Wait until the current agent is not paused.

        Cancellation: a checkpoint only.

        Raises:
            SessionClosedError: the session closes.
        """
        await self._current().wait_resumed()

    async def wait_for_current_floor(self) -> object:
        """See ``BackgroundHost.wait_for_current_floor``.

        Cancellation: a checkpoint only.

        Raises:
            SessionClosedError: the session closes.
        """
        return await self._current().wait_for_current_floor()

    @property
    def floor(self) -> Floor:
        return self._session.floor

    def say_filler(self, text: str) -> SpeechHandle:
        return self._current().say_filler(text)

    def on_state_events(self, filler: Filler, *, listen: bool) -> None:
        filler.follow_states(self._session.conversation.events, listen=listen)

    def hold_run(self) -> RunHold:
        return self._session.conversation.hold_run()

    def background_reply(self, instructions: str, tool_choice: ToolChoice | None
                         ) -> SpeechHandle:
        return self._current().background_reply(instructions, tool_choice)


class SessionScope:
    """The session-scoped calls of one session (see the module docs).

    It owns no task or nursery of its own: while the session runs, its calls start in the
    session's work nursery (:func:`host_session_scopes`). It is made on first use, so a
    session whose tools are all agent-scoped never holds one.
    """

    def __init__(self, session: ScopedSession) -> None:
        self.background = BackgroundTools(CurrentAgent(session))
        self.tool_calls = ToolCalls(session_calls(session))
        self._nursery: trio.Nursery | None = None
        self.bind(_hosts.get(session))

    def bind(self, nursery: trio.Nursery | None) -> None:
        """Start the calls in ``nursery`` from now on (None: the session's work ended)."""
        self._nursery = nursery
        self.background.bind(nursery)

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:  # noqa: ANN401
        """Run ``fn(*args)`` in the scope.

        Raises:
            SessionClosedError: the scope is not running (the session is not).
        """
        if self._nursery is None:
            raise SessionClosedError("the session is not running")
        self._nursery.start_soon(fn, *args)


_scopes: weakref.WeakKeyDictionary[Any, SessionScope] = weakref.WeakKeyDictionary()
_hosts: weakref.WeakKeyDictionary[Any, trio.Nursery] = weakref.WeakKeyDictionary()


def session_scope(session: ScopedSession) -> SessionScope:
    """The scope of ``session`` (created on first use; dropped with the session)."""
    scope = _scopes.get(session)
    if scope is None:
        scope = _scopes[session] = SessionScope(session)
    return scope


def host_session_scopes(session: ScopedSession, nursery: trio.Nursery
                        ) -> AbstractContextManager[None]:
    """While the block runs, ``session``'s scoped calls start in ``nursery`` (its work
    nursery: cancelling it cancels every session-scoped call and deferred reply); after it,
    none starts.

    Cancellation: not a checkpoint.
    """
    return _HostedScopes(session, nursery)


class _HostedScopes:
    """The block of :func:`host_session_scopes`: a class, as it lasts as long as the session
    (a generator-based block would keep its generator and frame alive that long)."""

    __slots__ = ("_nursery", "_session")

    def __init__(self, session: ScopedSession, nursery: trio.Nursery) -> None:
        self._session = session
        self._nursery = nursery

    def __enter__(self) -> None:
        _hosts[self._session] = self._nursery
        scope = _scopes.get(self._session)
        if scope is not None:
            scope.bind(self._nursery)

    def __exit__(self, *exc_info: object) -> None:
        del _hosts[self._session]
        scope = _scopes.get(self._session)
        if scope is not None:
            scope.bind(None)
