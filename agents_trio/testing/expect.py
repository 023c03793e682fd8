"""The ``expect`` DSL: assertions over a run's events, as ``result.expect`` returns them.

``result.expect`` is a :class:`RunAssert` with a cursor over the events of a
:class:`~agents_trio.RunResult`. Its failures raise ``AssertionError`` with a listing of every
event and an arrow (``>>>``) at the event concerned (:func:`format_events`).

The run events themselves (:class:`~agents_trio.run_result.ChatMessageEvent`, ...) are what
the run records; they live in ``agents_trio.run_events``, below both ``run_result`` and this
module, which only reads them (so this module does not import ``run_result``: no import
circle). The core never imports this module at import time: ``RunResult.expect`` imports it
on first use.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, overload

from ..run_events import (AgentHandoffEvent, ChatMessageEvent, EventType, FunctionCallEvent,
                          FunctionCallOutputEvent, RunEvent)

if TYPE_CHECKING:
    from ..chat import ChatContext, ChatRole, FunctionCall, FunctionCallOutput
    from ..models import FunctionToolCall
    from ..tools import FunctionTool

_CONTENT_PREVIEW = 200


def _given(value: object) -> bool:
    """Whether a criterion was given: None and a ``NOT_GIVEN`` (this runtime's or LiveKit's,
    both classes named ``NotGiven``: LiveKit's signatures default to it) are not."""
    return value is not None and type(value).__name__ != "NotGiven"


class _HasEvents(Protocol):
    """A run result (``RunResult``): its recorded events."""

    @property
    def events(self) -> list[RunEvent]: ...


# --------------------------------------------------------------------------------------------
# Event listing for failure messages


def _describe_agent(agent: object) -> str:
    return "None" if agent is None else type(agent).__name__


def _describe_event(event: RunEvent) -> str:
    item = event.item
    if isinstance(event, ChatMessageEvent):
        text = item.text_content or ""  # type: ignore[union-attr]
        if len(text) > _CONTENT_PREVIEW:
            text = text[:_CONTENT_PREVIEW] + "..."
        desc = f"message role={item.role} content={json.dumps(text)}"  # type: ignore[union-attr]
        if item.interrupted:  # type: ignore[union-attr]
            desc += " interrupted=True"
        return desc
    if isinstance(event, FunctionCallEvent):
        return f"function_call name={item.name} arguments={item.arguments}"  # type: ignore
    if isinstance(event, FunctionCallOutputEvent):
        return (f"function_call_output name={item.name} "  # type: ignore[union-attr]
                f"output={json.dumps(item.output)} is_error={item.is_error}")  # type: ignore
    if isinstance(event, AgentHandoffEvent):
        return (f"agent_handoff old_agent={_describe_agent(event.old_agent)} "
                f"new_agent={_describe_agent(event.new_agent)}")
    return f"{getattr(event, 'type', type(event).__name__)} {item!r}"


def format_events(events: Sequence[RunEvent], *, selected_index: int | None = None) -> str:
    """A numbered listing of ``events`` with ``>>>`` at ``selected_index``.

    Args:
        events: The events to list.
        selected_index: The event to point at; ``len(events)`` points past the end.

    Returns:
        The listing, one line per event.
    """
    lines = []
    for i, event in enumerate(events):
        prefix = ">>>" if i == selected_index else "   "
        lines.append(f"{prefix} [{i}] {_describe_event(event)}")
    if not events:
        lines.append("    (no events)")
    if selected_index is not None and selected_index >= len(events):
        lines.append(">>> (end of events)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Assertions


class RunAssert:
    """Assertions over a run's events, with a cursor for ``next_event``/``skip_next``.

    Args:
        source: The run result (its live event list is used) or a list of events.
    """

    def __init__(self, source: _HasEvents | Sequence[RunEvent]) -> None:
        self._events: Sequence[RunEvent] = (
            source if isinstance(source, Sequence) else source.events)
        self._current_index = 0

    def fail(self, message: str, index: int | None = None) -> NoReturn:
        """Raise ``AssertionError(message)`` with the event listing, ``>>>`` at ``index``.

        Args:
            message: What was expected and not found.
            index: The event to point at; the cursor's event by default, ``-1`` for none.

        Raises:
            AssertionError: Always.
        """
        __tracebackhide__ = True
        marker = self._current_index if index is None else index
        listing = format_events(self._events, selected_index=marker)
        raise AssertionError(f"{message}\nEvents:\n{listing}")

    def _current_event(self) -> EventAssert:
        __tracebackhide__ = True
        if self._current_index >= len(self._events):
            self.fail("Expected another event, but none left.")
        return EventAssert(self._events[self._current_index], self, self._current_index)

    @overload
    def __getitem__(self, key: int) -> EventAssert: ...

    @overload
    def __getitem__(self, key: slice) -> EventRangeAssert: ...

    def __getitem__(self, key: int | slice) -> EventAssert | EventRangeAssert:
        """An event (``expect[i]``, negative allowed) or a range (``expect[a:b]``).

        Indexing does not move the cursor.

        Raises:
            AssertionError: If an int index is out of range.
            TypeError: If the key is neither int nor slice.
        """
        __tracebackhide__ = True
        if isinstance(key, slice):
            start, _, step = key.indices(len(self._events))
            return EventRangeAssert(list(self._events[key]), self, key, start, step)
        if isinstance(key, int):
            idx = key + len(self._events) if key < 0 else key
            if not 0 <= idx < len(self._events):
                self.fail(
                    f"Index {key} out of range (total events: {len(self._events)})")
            return EventAssert(self._events[idx], self, idx)
        raise TypeError(f"RunAssert indices must be int or slice, not {type(key).__name__}")

    @overload
    def next_event(self, type: None = None) -> EventAssert: ...

    @overload
    def next_event(self, type: Literal["message"]) -> ChatMessageAssert: ...

    @overload
    def next_event(self, type: Literal["function_call"]) -> FunctionCallAssert: ...

    @overload
    def next_event(self, type: Literal["function_call_output"]) -> FunctionCallOutputAssert: ...

    @overload
    def next_event(self, type: Literal["agent_handoff"]) -> AgentHandoffAssert: ...

    def next_event(self, type: EventType | None = None) -> EventAssert:
        """Move the cursor to the next event (of ``type``, skipping others) and return it.

        Args:
            type: Only consider events of this type; non-matching events are skipped.

        Returns:
            An :class:`EventAssert`, or with ``type`` the typed assert for it
            (:class:`ChatMessageAssert`, ...), which is also an :class:`EventAssert`.

        Raises:
            AssertionError: If no (matching) event is left.
        """
        __tracebackhide__ = True
        while True:
            if self._current_index >= len(self._events):
                what = "another event" if type is None else f"another {type!r} event"
                self.fail(f"Expected {what}, but none left.")
            ev = EventAssert(self._events[self._current_index], self, self._current_index)
            self._current_index += 1
            if type is None or ev.event().type == type:
                break
        if type == "message":
            return ev.is_message()
        if type == "function_call":
            return ev.is_function_call()
        if type == "function_call_output":
            return ev.is_function_call_output()
        if type == "agent_handoff":
            return ev.is_agent_handoff()
        return ev

    def skip_next(self, count: int = 1) -> RunAssert:
        """Move the cursor past ``count`` events.

        Returns:
            This RunAssert, for chaining.

        Raises:
            AssertionError: If fewer than ``count`` events are left.
        """
        __tracebackhide__ = True
        for i in range(count):
            if self._current_index >= len(self._events):
                self.fail(
                    f"Tried to skip {count} event(s), but only {i} were available.")
            self._current_index += 1
        return self

    def skip_next_event_if(self, *, type: EventType, role: ChatRole | None = None,
                           name: str | None = None, arguments: dict[str, Any] | None = None,
                           output: str | None = None, is_error: bool | None = None,
                           new_agent_type: type | None = None) -> EventAssert | None:
        """Consume the next event if it matches; never fails.

        Args:
            type: The event type to match.
            role: For messages, the role to match.
            name: For function calls, the name to match.
            arguments: For function calls, a subset of the parsed arguments to match.
            output: For function call outputs, the exact output to match.
            is_error: For function call outputs, the error flag to match.
            new_agent_type: For handoffs, the class the new agent must be an instance of.

        Returns:
            The typed assert of the consumed event, or None (cursor unchanged) if there is no
            next event or it does not match.
        """
        if self._current_index >= len(self._events):
            return None
        ev = EventAssert(self._events[self._current_index], self, self._current_index)
        try:
            if type == "message":
                matched: EventAssert = ev.is_message(role=role)
            elif type == "function_call":
                matched = ev.is_function_call(name=name, arguments=arguments)
            elif type == "function_call_output":
                matched = ev.is_function_call_output(output=output, is_error=is_error)
            elif type == "agent_handoff":
                matched = ev.is_agent_handoff(new_agent_type=new_agent_type)
            else:
                raise ValueError(f"unknown event type {type!r}")
        except AssertionError:
            return None
        self._current_index += 1
        return matched

    def no_more_events(self) -> None:
        """Assert the cursor is past the last event.

        Raises:
            AssertionError: If events remain.
        """
        __tracebackhide__ = True
        if self._current_index < len(self._events):
            event = self._events[self._current_index]
            self.fail(
                f"Expected no more events, but found: {type(event).__name__}")

    def contains_message(self, *, role: ChatRole | None = None) -> ChatMessageAssert:
        """Assert some event is a message (with ``role``); see :class:`EventRangeAssert`."""
        __tracebackhide__ = True
        return self[:].contains_message(role=role)

    def contains_function_call(self, *, name: str | None = None,
                               arguments: dict[str, Any] | None = None) -> FunctionCallAssert:
        """Assert some event is a matching function call; see :class:`EventRangeAssert`."""
        __tracebackhide__ = True
        return self[:].contains_function_call(name=name, arguments=arguments)

    def contains_function_call_output(self, *, output: str | None = None,
                                      is_error: bool | None = None) -> FunctionCallOutputAssert:
        """Assert some event is a matching function call output."""
        __tracebackhide__ = True
        return self[:].contains_function_call_output(output=output, is_error=is_error)

    def contains_agent_handoff(self, *, new_agent_type: type | None = None
                               ) -> AgentHandoffAssert:
        """Assert some event is a handoff (to an instance of ``new_agent_type``)."""
        __tracebackhide__ = True
        return self[:].contains_agent_handoff(new_agent_type=new_agent_type)


class EventAssert:
    """Assertions about one event.

    Args:
        event: The event.
        parent: The RunAssert it came from (for the failure listing).
        index: The event's index in the run.
    """

    def __init__(self, event: RunEvent, parent: RunAssert, index: int) -> None:
        self._event = event
        self._parent = parent
        self._index = index

    def __repr__(self) -> str:
        return f"{type(self).__name__}([{self._index}] {_describe_event(self._event)})"

    def _raise(self, message: str) -> None:
        __tracebackhide__ = True
        self._parent.fail(message, index=self._index)

    def event(self) -> RunEvent:
        """The event under assertion."""
        return self._event

    def _expect_type(self, cls: type, label: str) -> None:
        __tracebackhide__ = True
        if not isinstance(self._event, cls):
            self._raise(f"Expected {label} event at [{self._index}], "
                        f"got {getattr(self._event, 'type', type(self._event).__name__)}")

    def is_message(self, *, role: ChatRole | None = None) -> ChatMessageAssert:
        """Assert the event is a message (from ``role``).

        Raises:
            AssertionError: On a different event type or role.
        """
        __tracebackhide__ = True
        self._expect_type(ChatMessageEvent, "message")
        item = self._event.item
        if _given(role) and item.role != role:  # type: ignore[union-attr]
            self._raise(f"Expected role {role!r}, got {item.role!r}")  # type: ignore
        return ChatMessageAssert(self._event, self._parent, self._index)

    def is_function_call(self, *, name: str | None = None,
                         arguments: dict[str, Any] | None = None) -> FunctionCallAssert:
        """Assert the event is a function call (to ``name``, with ``arguments`` a subset).

        Args:
            name: The function name to match.
            arguments: Key/values that must all be present in the parsed JSON arguments.

        Raises:
            AssertionError: On a different event type, name or argument value.
        """
        __tracebackhide__ = True
        self._expect_type(FunctionCallEvent, "function_call")
        item: FunctionCall = self._event.item  # type: ignore[assignment]
        if _given(name) and item.name != name:
            self._raise(f"Expected function call name {name!r}, got {item.name!r}")
        if _given(arguments):
            assert arguments is not None
            try:
                actual = json.loads(item.arguments or "{}")
            except ValueError:
                self._raise(f"Function call arguments are not valid JSON: {item.arguments!r}")
            if not isinstance(actual, dict):
                self._raise(f"Function call arguments are not an object: {item.arguments!r}")
            for key, value in arguments.items():
                if key not in actual:
                    self._raise(f"Expected argument {key!r}={value!r}, but it is missing")
                if actual[key] != value:
                    self._raise(f"For argument {key!r}, expected {value!r}, got {actual[key]!r}")
        return FunctionCallAssert(self._event, self._parent, self._index)

    def is_function_call_output(self, *, output: str | None = None,
                                is_error: bool | None = None) -> FunctionCallOutputAssert:
        """Assert the event is a function call output (exactly ``output``, with ``is_error``).

        Raises:
            AssertionError: On a different event type, output or error flag.
        """
        __tracebackhide__ = True
        self._expect_type(FunctionCallOutputEvent, "function_call_output")
        item: FunctionCallOutput = self._event.item  # type: ignore[assignment]
        if _given(output) and item.output != output:
            self._raise(f"Expected output {output!r}, got {item.output!r}")
        if _given(is_error) and item.is_error != is_error:
            self._raise(f"Expected is_error={is_error}, got {item.is_error}")
        return FunctionCallOutputAssert(self._event, self._parent, self._index)

    def is_agent_handoff(self, *, new_agent_type: type | None = None) -> AgentHandoffAssert:
        """Assert the event is a handoff (to an instance of ``new_agent_type``).

        Raises:
            AssertionError: On a different event type or new agent class.
        """
        __tracebackhide__ = True
        self._expect_type(AgentHandoffEvent, "agent_handoff")
        new_agent = self._event.new_agent  # type: ignore[union-attr]
        if (new_agent_type is not None and _given(new_agent_type)
                and not isinstance(new_agent, new_agent_type)):
            self._raise(f"Expected new_agent of type {new_agent_type.__name__}, "
                        f"got {_describe_agent(new_agent)}")
        return AgentHandoffAssert(self._event, self._parent, self._index)


class ChatMessageAssert(EventAssert):
    """A message event that passed ``is_message``; ``event()`` returns it."""

    def event(self) -> ChatMessageEvent:
        return self._event  # type: ignore[return-value]

    async def judge(self, llm: object, *, intent: str) -> ChatMessageAssert:
        """Ask ``llm`` whether the message fulfills ``intent`` (LiveKit's ``judge``).

        The LLM gets an evaluator prompt (:func:`judge_chat_context`; this runtime's words,
        to the effect of LiveKit's) and must call
        ``check_intent(success: bool, reason: str)`` (``tool_choice="required"``); its first
        tool call is the verdict. ``llm`` is what ``AgentSession(llm=...)`` takes: a Trio
        model (``agents_trio.testing.FakeLLM`` scripted with the verdict, see
        :func:`judge_verdict`), a LiveKit plugin LLM or a model string. Unlike LiveKit, no
        ``temperature=0`` is sent (the Trio LLM protocol has no ``extra_kwargs``).

        Returns:
            This assert, for chaining.

        Raises:
            AssertionError: The message has no text, ``intent`` is empty, the LLM made no
                tool call, or its verdict is a failure (``Judgement failed: <reason>``).
            TypeError: ``llm`` is no LLM.

        Cancellation: cancels the LLM request.
        """
        __tracebackhide__ = True
        msg_content = self.event().item.text_content
        if not msg_content:
            self._raise("The chat message is empty.")
        if not intent:
            self._raise("Intent is required to judge the message.")
        assert msg_content is not None
        from ..model_resolution import resolve_model
        model: Any = resolve_model("judge", "llm", llm)
        if model is None:
            raise TypeError("judge() takes an LLM, got None")
        tool = _check_intent_tool()
        arguments: str | None = None
        async with model.chat(chat_ctx=judge_chat_context(intent, msg_content), tools=[tool],
                              tool_choice="required") as stream:
            async for chunk in stream:
                if chunk.delta is not None and chunk.delta.tool_calls:
                    arguments = chunk.delta.tool_calls[0].arguments
        if not arguments:
            self._raise("LLM did not return any arguments for evaluation.")
        assert arguments is not None
        from ..tools import parse_arguments
        verdict = parse_arguments(tool, arguments)
        if not verdict["success"]:
            self._raise(f"Judgement failed: {verdict['reason']}")
        return self


_JUDGE_SYSTEM = (
    "You grade one reply of a conversational agent against a goal.\n"
    "Read the goal and the reply, then decide whether the reply achieves the goal.\n"
    "Answer only by calling `check_intent(success: bool, reason: str)`.\n"
    "Grade strictly: unless the reply plainly achieves the goal, set `success` to false and "
    "say why.")


def judge_request_text(intent: str, message: str) -> str:
    """The user turn of a ``judge()`` request: the text a ``FakeLLM`` script keys its verdict
    on (the last item of the request)."""
    return ("Does this reply achieve the goal?\n\n"
            f"Goal:\n{intent}\n\n"
            f"Reply:\n{message}")


def judge_chat_context(intent: str, message: str) -> ChatContext:
    """The chat context ``judge()`` sends: the evaluator's instructions, then
    :func:`judge_request_text`."""
    from ..chat import ChatContext
    ctx = ChatContext()
    ctx.add_message(role="system", content=_JUDGE_SYSTEM)
    ctx.add_message(role="user", content=judge_request_text(intent, message))
    return ctx


def judge_verdict(success: bool, reason: str) -> FunctionToolCall:
    """The tool call a judge LLM answers with: script it in a ``FakeLLM``
    (``actions.add_llm("", [judge_verdict(True, "…")], input=judge_request_text(…))``)."""
    from ..models import FunctionToolCall
    return FunctionToolCall(name="check_intent", call_id="judge",
                            arguments=json.dumps({"success": success, "reason": reason}))


def _check_intent_tool() -> FunctionTool:
    from ..tools import function_tool

    @function_tool
    async def check_intent(success: bool, reason: str) -> tuple[bool, str]:
        """Report whether the reply achieves the goal.

        Args:
            success: True when the reply achieves the goal.
            reason: Why, in one sentence.
        """
        return success, reason

    return check_intent


class FunctionCallAssert(EventAssert):
    """A function call event that passed ``is_function_call``; ``event()`` returns it."""

    def event(self) -> FunctionCallEvent:
        return self._event  # type: ignore[return-value]


class FunctionCallOutputAssert(EventAssert):
    """A function call output event that passed ``is_function_call_output``."""

    def event(self) -> FunctionCallOutputEvent:
        return self._event  # type: ignore[return-value]


class AgentHandoffAssert(EventAssert):
    """A handoff event that passed ``is_agent_handoff``; ``event()`` returns it."""

    def event(self) -> AgentHandoffEvent:
        return self._event  # type: ignore[return-value]


class EventRangeAssert:
    """Assertions over a slice of the events (``expect[a:b]``).

    Args:
        events: The events in the slice.
        parent: The RunAssert it came from.
        rng: The slice.
        start: Index in the run of the slice's first event.
        step: The slice step.
    """

    def __init__(self, events: list[RunEvent], parent: RunAssert, rng: slice,
                 start: int = 0, step: int = 1) -> None:
        self._events = events
        self._parent = parent
        self._rng = rng
        self._start = start
        self._step = step

    def _candidates(self) -> list[EventAssert]:
        return [EventAssert(ev, self._parent, self._start + i * self._step)
                for i, ev in enumerate(self._events)]

    def _fail(self, what: str) -> None:
        __tracebackhide__ = True
        rng = f"[{'' if self._rng.start is None else self._rng.start}:" \
              f"{'' if self._rng.stop is None else self._rng.stop}]"
        self._parent.fail(f"No {what} found in range {rng}", index=-1)

    def contains_message(self, *, role: ChatRole | None = None) -> ChatMessageAssert:
        """The first message in the range (from ``role``).

        Raises:
            AssertionError: If there is none.
        """
        __tracebackhide__ = True
        for cand in self._candidates():
            try:
                return cand.is_message(role=role)
            except AssertionError:
                pass
        self._fail("message" + (f" with role={role!r}" if _given(role) else ""))
        raise AssertionError("unreachable")

    def contains_function_call(self, *, name: str | None = None,
                               arguments: dict[str, Any] | None = None) -> FunctionCallAssert:
        """The first function call in the range matching ``name``/``arguments``.

        Raises:
            AssertionError: If there is none.
        """
        __tracebackhide__ = True
        for cand in self._candidates():
            try:
                return cand.is_function_call(name=name, arguments=arguments)
            except AssertionError:
                pass
        crit = ", ".join(f"{k}={v!r}" for k, v in (("name", name), ("arguments", arguments))
                         if _given(v))
        self._fail("function_call" + (f" with {crit}" if crit else ""))
        raise AssertionError("unreachable")

    def contains_function_call_output(self, *, output: str | None = None,
                                      is_error: bool | None = None) -> FunctionCallOutputAssert:
        """The first function call output in the range matching ``output``/``is_error``.

        Raises:
            AssertionError: If there is none.
        """
        __tracebackhide__ = True
        for cand in self._candidates():
            try:
                return cand.is_function_call_output(output=output, is_error=is_error)
            except AssertionError:
                pass
        crit = ", ".join(f"{k}={v!r}" for k, v in (("output", output), ("is_error", is_error))
                         if _given(v))
        self._fail("function_call_output" + (f" with {crit}" if crit else ""))
        raise AssertionError("unreachable")

    def contains_agent_handoff(self, *, new_agent_type: type | None = None
                               ) -> AgentHandoffAssert:
        """The first handoff in the range (to an instance of ``new_agent_type``).

        Raises:
            AssertionError: If there is none.
        """
        __tracebackhide__ = True
        for cand in self._candidates():
            try:
                return cand.is_agent_handoff(new_agent_type=new_agent_type)
            except AssertionError:
                pass
        suffix = f" to {new_agent_type.__name__}" if _given(new_agent_type) else ""  # type: ignore[union-attr]
        self._fail("agent_handoff" + suffix)
        raise AssertionError("unreachable")


__all__ = [
    "AgentHandoffAssert", "ChatMessageAssert", "EventAssert", "EventRangeAssert", 
    "FunctionCallAssert", "FunctionCallOutputAssert", "RunAssert", "format_events",
    "judge_chat_context", "judge_request_text", "judge_verdict",
]
