"""RunResult: what ``session.run()`` returns; its ``expect`` DSL is in ``agents_trio.testing``.

A run records the chat items produced while it is active as *run events*, kept in
``created_at`` order (an item is inserted after the last event created at or before it, so a
tool output committed after a message spoken during the tool still reads chronologically).

The session decides when a run is finished by *watching* things: speech handles, tasks and
other duck-typed handles (``done()``, ``add_done_callback(cb)``, ``exception()``), plus
arbitrary *holds* (``_hold()`` / ``_release(token)``) that keep the run open, e.g. while an
activity switch is in progress. The run becomes done when the last watched or held thing
finishes; a run with nothing watched at construction stays open until something is watched
and finishes, or until the session settles it with ``_check_done()`` or ``_fail(exc)``.

``result.expect`` is a :class:`~agents_trio.testing.expect.RunAssert` with a cursor over the
events (the assertion DSL lives in ``agents_trio.testing.expect`` and is imported on first use;
its names stay importable from this module too).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import trio

from .chat import AgentHandoff, ChatMessage, FunctionCall, FunctionCallOutput, sorts_before_or_with
# the run events live below this module and the expect DSL (which reads them); re-exported here
from .run_events import (AgentHandoffEvent, ChatMessageEvent, EventType as EventType,
                         FunctionCallEvent, FunctionCallOutputEvent, RunEvent)

if TYPE_CHECKING:
    from .chat import ChatItem
    from .testing.expect import RunAssert

T = TypeVar("T")


class _Watchable(Protocol):
    def done(self) -> bool: ...

    def add_done_callback(self, cb: Callable[[Any], Any]) -> Any: ...

    def exception(self) -> BaseException | None: ...


_UNSET: Any = object()


# --------------------------------------------------------------------------------------------
# RunResult


class RunResult(Generic[T]):
    """The result of one ``session.run()``: recorded events, completion and final output.

    Args:
        user_input: The user text that started the run, if any (kept for display only; the
            user message itself is never recorded as an event).
    """

    def __init__(self, user_input: str | None = None) -> None:
        self.user_input = user_input
        self._events: list[RunEvent] = []
        self._done_ev = trio.Event()
        # id(handle) -> handle; holds are stored the same way (token -> token).
        self._pending: dict[int, Any] = {}
        self._seen: weakref.WeakSet[Any] = weakref.WeakSet()
        self._error: BaseException | None = None
        self._final_output: Any = _UNSET
        self._expect: RunAssert | None = None

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        return f"RunResult(user_input={self.user_input!r}, {state}, events={len(self._events)})"

    # -- public ----------------------------------------------------------------------------

    @property
    def events(self) -> list[RunEvent]:
        """The recorded run events, in ``created_at`` order."""
        return self._events

    @property
    def expect(self) -> RunAssert:
        """The assertion helper over :attr:`events`.

        Created on first access and then reused, so its cursor carries over between
        ``result.expect.next_event()`` calls.
        """
        if self._expect is None:
            from .testing.expect import RunAssert  # the DSL is test code: loaded on first use
            self._expect = RunAssert(self)
        return self._expect

    @property
    def final_output(self) -> T:
        """The run's final output (e.g. an AgentTask's result).

        Raises:
            RuntimeError: If the run is not done, or no final output was set.
        """
        if not self.done():
            raise RuntimeError("cannot retrieve final_output, RunResult is not done")
        if self._final_output is _UNSET:
            raise RuntimeError("no final output")
        return self._final_output  # type: ignore[no-any-return]

    def done(self) -> bool:
        """Whether the run has finished."""
        return self._done_ev.is_set()

    async def wait(self) -> RunResult[T]:
        """Wait until the run is done.

        Returns:
            This result.

        Raises:
            BaseException: The error the run finished with (the last failed watched handle's
                exception, or the one given to ``_fail``).
        """
        await self._done_ev.wait()
        if self._error is not None:
            raise self._error
        return self

    def __await__(self) -> Generator[Any, None, RunResult[T]]:
        return self.wait().__await__()

    # -- internal API used by the session --------------------------------------------------

    def _record_item(self, item: ChatItem, *, old_agent: Any = None,
                     new_agent: Any = None) -> RunEvent | None:
        """Record a chat item as a run event, inserted by creation time.

        Only assistant messages are recorded (user and system messages are not);
        ``AgentConfigUpdate`` items are ignored.

        Args:
            item: The chat item.
            old_agent: For handoff items, the agent handed off from.
            new_agent: For handoff items, the agent handed off to.

        Returns:
            The recorded event, or None when the item is not recorded.
        """
        event: RunEvent | None = None
        if isinstance(item, ChatMessage):
            if item.role == "assistant":
                event = ChatMessageEvent(item)
        elif isinstance(item, FunctionCall):
            event = FunctionCallEvent(item)
        elif isinstance(item, FunctionCallOutput):
            event = FunctionCallOutputEvent(item)
        elif isinstance(item, AgentHandoff):
            event = AgentHandoffEvent(item, old_agent, new_agent)
        if event is None:
            return None
        idx = len(self._events)
        while idx > 0 and not sorts_before_or_with(self._events[idx - 1].item, item):
            idx -= 1
        self._events.insert(idx, event)
        return event

    def _watch(self, handle: _Watchable) -> None:
        """Keep the run open until ``handle`` is done (no-op once the run is done).

        Args:
            handle: Anything with ``done()``, ``add_done_callback(cb)`` and ``exception()``.
        """
        if self.done():
            return
        self._seen.add(handle)
        key = id(handle)
        if self._pending.get(key) is handle:
            return
        self._pending[key] = handle
        if handle.done():
            self._on_handle_done(handle)
            return
        handle.add_done_callback(self._on_handle_done)

    def _watches(self, handle: Any) -> bool:
        """Whether ``handle`` was ever watched by this run (its items belong to the run)."""
        return handle in self._seen

    def _unwatch(self, handle: _Watchable) -> None:
        """Stop waiting for ``handle``; the run may finish if nothing else is pending.

        Args:
            handle: A handle given to ``_watch`` earlier (unknown handles are ignored).
        """
        key = id(handle)
        if self._pending.get(key) is not handle:
            return
        del self._pending[key]
        self._check_done()

    def _hold(self) -> object:
        """Keep the run open until the returned token is released.

        Returns:
            A token for ``_release``.
        """
        token = object()
        if not self.done():
            self._pending[id(token)] = token
        return token

    def _release(self, token: object) -> None:
        """Release a hold from ``_hold``; the run may finish if nothing else is pending.

        Args:
            token: The token ``_hold`` returned (unknown tokens are ignored).
        """
        key = id(token)
        if self._pending.get(key) is not token:
            return
        del self._pending[key]
        self._check_done()

    def _check_done(self) -> bool:
        """Mark the run done if nothing is watched or held.

        Returns:
            Whether the run is done.
        """
        if not self.done() and not self._pending:
            self._done_ev.set()
        return self.done()

    def _set_final_output(self, value: Any) -> None:
        """Set the value :attr:`final_output` returns once the run is done."""
        self._final_output = value

    def _fail(self, exc: BaseException) -> None:
        """Finish the run now with ``exc`` (ignored if the run is already done).

        Args:
            exc: The error ``await result`` raises, e.g. ``RuntimeError("session closed")``.
        """
        if self.done():
            return
        self._error = exc
        self._pending.clear()
        self._done_ev.set()

    def _on_handle_done(self, handle: Any) -> None:
        key = id(handle)
        if self._pending.get(key) is not handle:
            return  # unwatched meanwhile, or already processed
        del self._pending[key]
        if self.done():
            return
        try:
            exc = handle.exception()
        except Exception as e:  # a future that cannot report its exception
            exc = e
        if exc is not None:
            self._error = exc
        self._check_done()


# The expect DSL moved to agents_trio.testing.expect; its names stay importable from here.
_EXPECT_NAMES = frozenset({
    "AgentHandoffAssert", "ChatMessageAssert", "EventAssert", "EventRangeAssert",
    "FunctionCallAssert", "FunctionCallOutputAssert", "RunAssert", "format_events",
})


def __getattr__(name: str) -> object:
    if name not in _EXPECT_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .testing.expect import (AgentHandoffAssert, ChatMessageAssert, EventAssert,
                                 EventRangeAssert, FunctionCallAssert, FunctionCallOutputAssert,
                                 RunAssert, format_events)
    dsl: dict[str, object] = {
        "AgentHandoffAssert": AgentHandoffAssert, "ChatMessageAssert": ChatMessageAssert,
        "EventAssert": EventAssert, "EventRangeAssert": EventRangeAssert,
        "FunctionCallAssert": FunctionCallAssert,
        "FunctionCallOutputAssert": FunctionCallOutputAssert, "RunAssert": RunAssert,
        "format_events": format_events}
    return dsl[name]


__all__ = [
    "AgentHandoffEvent",
    "ChatMessageEvent",
    "FunctionCallEvent",
    "FunctionCallOutputEvent",
    "RunEvent",
    "RunResult",
]
