"""Duplicate tool calls: ``@function_tool(on_duplicate=..., duplicate_scope=...)``.

An activity keeps one :class:`ToolCalls`: the calls its speeches dispatched that have not
finished. A new call is *admitted* when it is dispatched, synchronously, so the calls of one
LLM step are judged in the order the LLM made them:

- ``"allow"`` (the default): it runs;
- ``"reject"``: while a duplicate runs, the call does not run; its output tells the LLM that
  the same tool is already running (listing the running calls);
- ``"confirm"``: like ``"reject"``, unless the LLM set ``lk_agents_confirm_duplicate``;
- ``"replace"``: the running duplicates are cancelled (each must be ``CANCELLABLE`` and its
  speech still interruptible, else the call fails with a ``ToolError`` output), and the call
  runs once they have ended. A replaced call answers with an empty output asking no reply.

A duplicate is another running call of the same tool (``duplicate_scope="name"``) or of the
same tool with the same validated arguments (``"name_and_args"``).

Each admitted call runs inside its own cancel scope, owned by the tool task that runs it (the
tool nursery of its speech): a replacement cancels that scope and waits for the task to leave
it; nothing outlives the nursery.

The activities of one session also share a :class:`SessionCalls`, the running calls by call_id,
through which the model cancels one (``lk_agents_cancel_task``, see ``cancel_tools``).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import trio

from ._errors import ToolError
from .chat import FunctionCall
from .tool_handling import (DEFAULT_ASYNC_TOOL_OPTIONS, DUPLICATE_CONFIRM, DUPLICATE_REJECT,
                            AsyncToolOptions, Template, render_template)
from .tools import (CONFIRM_DUPLICATE_PARAM, FunctionTool, ToolFlag, ToolOutcome,
                    execute_function_call, outcome_from_value, tool_error_outcome,
                    validated_arguments)

__all__ = ["Admission", "DUPLICATE_CONFIRM", "DUPLICATE_REJECT", "SessionCalls", "ToolCalls",
           "execute_admitted", "session_calls"]

DuplicateKey = tuple[str, str | None]


class _Running:
    """One admitted call: its key, whether it may be cancelled, and its scope."""

    def __init__(self, call: FunctionCall, key: DuplicateKey | None, cancellable: bool,
                 interruptible: Callable[[], bool]) -> None:
        self.call = call
        self.key = key
        self.cancellable = cancellable
        self.interruptible = interruptible
        self.scope = trio.CancelScope()
        self.ended = trio.Event()


class Admission:
    """How one dispatched call may proceed (see the module docs). ``release()`` it once."""

    def __init__(self, registry: ToolCalls, running: _Running | None, *,
                 answer: str | None = None, error: str | None = None,
                 replaces: tuple[_Running, ...] = ()) -> None:
        self._registry = registry
        self._running = running
        self.answer = answer  # the call does not run: this is its output
        self.error = error  # the call does not run: this is its error output
        self.replaces = replaces
        #: the call's scope was cancelled while it ran (a later duplicate replaced it,
        #: or its agent left)
        self.cancelled = False

    @property
    def scope(self) -> trio.CancelScope:
        """The scope the call runs in (a fresh, unregistered one for a refused call)."""
        return self._running.scope if self._running is not None else trio.CancelScope()

    def release(self) -> None:
        """The call ended (or never ran): it stops counting as running."""
        if self._running is not None:
            self._registry.remove(self._running)
            self._running.ended.set()
            self._running = None


class SessionCalls:
    """The running calls of every activity of one session, by call_id."""

    def __init__(self) -> None:
        self._by_id: dict[str, _Running] = {}

    def add(self, running: _Running) -> None:
        self._by_id[running.call.call_id] = running

    def remove(self, running: _Running) -> None:
        if self._by_id.get(running.call.call_id) is running:
            del self._by_id[running.call.call_id]

    def cancellable(self) -> list[FunctionCall]:
        """The calls running now that may be cancelled, oldest first."""
        return [r.call for r in self._by_id.values() if r.cancellable]

    async def cancel(self, call_id: str) -> None:
        """Cancel the running call ``call_id`` and wait until it has ended.

        Cancellation: stops waiting; the call was cancelled already.

        Raises:
            ToolError: no such call runs, it is not ``CANCELLABLE``, or the speech that made it
                may not be interrupted.
        """
        running = self._by_id.get(call_id)
        if running is None:
            raise ToolError(f"Task {call_id} not found")
        if not running.cancellable:
            raise ToolError(f"Tool call {call_id} is not cancellable")
        if not running.interruptible():
            raise ToolError(f"Tool call {call_id} is not cancellable because interruptions "
                            "are disallowed")
        running.scope.cancel()
        await running.ended.wait()


_by_session: weakref.WeakKeyDictionary[object, SessionCalls] = weakref.WeakKeyDictionary()


def session_calls(session: object) -> SessionCalls:
    """The running calls of ``session`` (created on first use; dropped with the session)."""
    calls = _by_session.get(session)
    if calls is None:
        calls = _by_session[session] = SessionCalls()
    return calls


class ToolCalls:
    """The running calls of one activity, for duplicate detection and replacement (and, in
    ``shared``, of its session, for cancellation by call_id)."""

    def __init__(self, shared: SessionCalls | None = None) -> None:
        self._running: list[_Running] = []
        self._shared = shared if shared is not None else SessionCalls()

    def __len__(self) -> int:
        return len(self._running)

    def remove(self, running: _Running) -> None:
        if running in self._running:
            self._running.remove(running)
        self._shared.remove(running)

    def admit(self, tool: FunctionTool | None, call: FunctionCall,
              options: AsyncToolOptions = DEFAULT_ASYNC_TOOL_OPTIONS, *,
              interruptible: Callable[[], bool] = lambda: True) -> Admission:
        """Judge ``call`` against the calls running now; an admitted call counts as running
        from here (no checkpoint between the judgement and the registration).

        Args:
            tool: The tool called (None: unknown; it runs, and fails as unknown).
            call: The call.
            options: The templates a refusal is written with (``tool_handling``).
            interruptible: Whether the speech that made the call may still be interrupted
                (a call replacing this one needs it).
        """
        if tool is None:
            return Admission(self, self._register(call, None, False, interruptible))
        mode = tool.on_duplicate
        key: DuplicateKey | None = None
        data = _decoded(call.arguments)
        confirmed = bool(data.pop(CONFIRM_DUPLICATE_PARAM, False)) if mode == "confirm" else False
        if mode != "allow":
            key = duplicate_key(tool, data)
            running = [r for r in self._running if r.key == key]
            if running:
                if mode == "replace":
                    refusal = _replace_refusal(tool, running)
                    if refusal is not None:
                        return Admission(self, None, error=refusal)
                    admitted = self._register(call, key, _cancellable(tool), interruptible)
                    return Admission(self, admitted, replaces=tuple(running))
                if mode == "reject" or not confirmed:
                    template = options["duplicate_reject_template" if mode == "reject"
                                       else "duplicate_confirm_template"]
                    return Admission(self, None, answer=_render(template, tool, running))
        return Admission(self, self._register(call, key, _cancellable(tool), interruptible))

    def _register(self, call: FunctionCall, key: DuplicateKey | None, cancellable: bool,
                  interruptible: Callable[[], bool]) -> _Running:
        running = _Running(call, key, cancellable, interruptible)
        self._running.append(running)
        self._shared.add(running)
        return running


def _cancellable(tool: FunctionTool) -> bool:
    return ToolFlag.CANCELLABLE in tool.flags


def _replace_refusal(tool: FunctionTool, running: list[_Running]) -> str | None:
    if any(not r.cancellable for r in running):
        return (f"cannot replace duplicate call of `{tool.name}`: running call is not "
                "cancellable (allow_cancellation=False)")
    stuck = [r for r in running if not r.interruptible()]
    if stuck:
        return ("Failed to cancel duplicate tool calls: " + "\n".join(
            f"Tool call {r.call.call_id} is not cancellable because interruptions are "
            "disallowed" for r in stuck))
    return None


def _render(template: Template, tool: FunctionTool, running: list[_Running]) -> str:
    calls = [msgspec.json.encode(r.call).decode() for r in running]
    return render_template(template, {"function_name": tool.name, "fnc_calls_json": calls,
                                      "fnc_calls_text": "\n".join(calls)})


def _decoded(arguments: str) -> dict[str, Any]:
    try:
        data = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def duplicate_key(tool: FunctionTool, data: Mapping[str, Any]) -> DuplicateKey:
    """What a call is deduplicated on: its tool's name, and for ``"name_and_args"`` its
    arguments after validation (so an omitted default and the default given explicitly
    match); arguments that do not validate are compared as sent."""
    if tool.duplicate_scope != "name_and_args":
        return (tool.name, None)
    try:
        return (tool.name, _canonical(validated_arguments(tool, dict(data))))
    except Exception:  # the call itself fails validation later; compare what was sent
        return (tool.name, _canonical(dict(data)))


async def execute_admitted(call: FunctionCall, tools: Mapping[str, FunctionTool],
                           admission: Admission, *,
                           on_start: Callable[[], None] = lambda: None,
                           **options: Any) -> ToolOutcome:  # noqa: ANN401
    """Run an admitted call (``options`` go to ``execute_function_call``).

    A refused call answers at once; a replacing call first cancels the calls it replaces and
    waits for them to end; a call replaced while it runs answers with an empty output that
    asks for no reply (and ``admission.cancelled`` is then True). ``on_start`` is called when
    a known tool starts running (after the calls it replaces ended; never for a refused call).

    Cancellation: cancels the call's tool (the caller records it as cancelled).
    """
    if admission.error is not None:
        return tool_error_outcome(call, admission.error)
    if admission.answer is not None:
        return outcome_from_value(call, admission.answer)
    for replaced in admission.replaces:
        replaced.scope.cancel()
    for replaced in admission.replaces:
        await replaced.ended.wait()
    outcome: ToolOutcome | None = None
    if call.name in tools:
        on_start()
    with admission.scope:
        outcome = await execute_function_call(call, tools, **options)
    if outcome is None:  # replaced by a later duplicate
        admission.cancelled = True
        return outcome_from_value(call, None)
    return outcome
