"""The invariants every conversation must keep, and ``check_conversation`` to check them.

An invariant is a function of a :class:`ConversationRecord` returning the violations it
found: None, a message, or an iterable of messages (raising ``AssertionError`` counts as a
message too). Each built-in invariant states exactly what it checks; those about answers
(one generation per input, every quiet input answered, the conversation settles) are in
``answers.py``.

The record (``ConversationRecord``) holds the session's events with their times, the history
after close, every request the scripted LLM received (what it answers: a user message, tool
outputs or instructions; the calls it made, named ``c<request>_<k>``), every execution of an
instrumented tool, every ``on_enter``/``on_exit`` call, the speech handles, the actions as
performed, the hangs and faults that happened, and the close's timing.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import trio
import trio.testing

from ..agent import Agent
from ..chat import ChatMessage, FunctionCall, FunctionCallOutput
from .answers import (QuietInput, agents_entered, conversation_settles, every_quiet_input_answered,
                      one_generation_per_input, quiet_inputs)
from .conversation import ConversationRecord, run_conversation
from .schedules import RunInput, Schedule

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

Invariant = Callable[[ConversationRecord], "None | str | Iterable[str]"]


class ConversationViolation(AssertionError):
    """A conversation broke invariants; the message lists them, the schedule and the run's
    timeline. ``violations`` holds the messages and ``record`` the run."""

    def __init__(self, violations: list[str], record: ConversationRecord) -> None:
        self.violations = violations
        self.record = record
        super().__init__(
            "\n".join(f"- {v}" for v in violations)
            + "\n--- schedule ---\n" + record.schedule.describe()
            + "\n--- timeline (schedule seconds) ---\n" + record.timeline())


# -- helpers on a record ------------------------------------------------------------------------

def no_exception_escapes(record: ConversationRecord) -> Iterable[str]:
    """Nothing escapes ``async with session`` (model, tool and hook failures are the
    runtime's to handle), and the run ends (no deadlock)."""
    if record.timed_out:
        yield ("the run did not end: still running at the deadline "
               f"(close requested at {record.t(record.close_requested_at):.2f}, returned at "
               f"{record.t(record.close_returned_at):.2f})")
    if record.escaped is not None:
        leaves = _leaves(record.escaped)
        summary = "; ".join(f"{type(e).__name__}: {e}" for e in leaves)
        where = "".join(traceback.format_exception(leaves[0])[-4:]).strip()
        yield f"{type(record.escaped).__name__} escaped `async with session`: {summary}\n{where}"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def close_is_last_event(record: ConversationRecord) -> Iterable[str]:
    """Exactly one ``close`` event, and no event after it."""
    names = [name for name, _, _ in record.events]
    if names.count("close") != 1:
        yield f"{names.count('close')} close events"
    elif names[-1] != "close":
        after = names[names.index("close") + 1:]
        yield f"events after close: {after[:5]}"


def close_within_grace(record: ConversationRecord) -> Iterable[str]:
    """Closing (``aclose`` and leaving ``async with``) takes at most ``close_grace`` per level
    of the agent stack plus one (task unwinding, then each ``on_exit``, innermost first), plus
    the shielded time of tools still running at the close, plus the session's
    ``session_close_transcript_timeout`` (the close waits that long for the user's last
    words)."""
    start, end = record.close_requested_at, record.exited_at
    if start is None or end is None:
        return
    bound, parts = close_bound(record, start)
    if end - start > bound + 1e-6:
        yield (f"closing took {end - start:.2f} s (from {record.t(start):.2f}), more than "
               f"{bound:.2f} s ({parts})")


def close_bound(record: ConversationRecord, start: float) -> tuple[float, str]:
    """How long a close asked for at ``start`` may take (see :func:`close_within_grace`),
    and what that bound is made of, in words."""
    grace = record.schedule.close_grace
    depth = max(1, agents_entered(record, start))
    shielded = sum(ex.plan.shield for ex in record.tool_executions
                   if ex.plan is not None and ex.started_at <= start
                   and (ex.ended_at is None or ex.ended_at > start))
    transcript = close_transcript_timeout(record)
    bound = grace * (depth + 1) + shielded + transcript
    return bound, (f"grace {grace:g} s x {depth + 1} levels + {shielded:g} s shielded + "
                   f"{transcript:g} s for the user's last words")


def close_transcript_timeout(record: ConversationRecord) -> float:
    """How long the close may wait for the user's last words (the session's
    ``session_close_transcript_timeout``)."""
    session = record.session
    return float(getattr(session, "session_close_transcript_timeout", 0.0) or 0.0)


def nothing_left_running(record: ConversationRecord) -> Iterable[str]:
    """Once ``async with session`` is left: no task the run started is alive, no model stream
    is open, no tool execution is unfinished, every speech handle is done, and every
    ``session.run`` call returned or raised."""
    if record.leftover_tasks:
        yield f"tasks left running after the session: {record.leftover_tasks}"
    if record.open_streams:
        yield f"model streams left open: {record.open_streams}"
    for ex in record.tool_executions:
        if ex.ended_at is None:
            yield (f"tool {ex.name} ({ex.call_id}, started at {record.t(ex.started_at):.2f}) "
                   "still runs after the session closed")
    for handle in record.speech_handles:
        if not handle.done():
            yield f"{handle!r} is not done after the session closed"
    for outcome in record.actions:
        if isinstance(outcome.action, RunInput) and outcome.ended_at is None:
            yield (f"session.run({outcome.action.text!r}) started at {record.t(outcome.at):.2f} "
                   "did not return or raise when the session closed")


def hooks_paired(record: ConversationRecord) -> Iterable[str]:
    """For every agent instance: ``on_enter`` and ``on_exit`` alternate, starting with
    ``on_enter``, and every ``on_enter`` has its ``on_exit`` once the session is closed."""
    by_agent: dict[int, list[Any]] = defaultdict(list)
    for hook in record.hook_calls:
        by_agent[id(hook.agent)].append(hook)
    for hooks in by_agent.values():
        expected = "on_enter"
        for hook in hooks:
            if hook.hook != expected:
                yield (f"{hook.agent.id}.{hook.hook} at {record.t(hook.at):.2f} without a "
                       f"matching {'on_exit' if expected == 'on_exit' else 'on_enter'} before "
                       f"it (calls: {[(h.hook, record.t(h.at)) for h in hooks]})")
                break
            expected = "on_exit" if expected == "on_enter" else "on_enter"
        else:
            if expected == "on_exit":
                last = hooks[-1]
                yield (f"{last.agent.id}.on_enter at {record.t(last.at):.2f} has no on_exit "
                       "after close")


def tool_calls_executed_at_most_once(record: ConversationRecord) -> Iterable[str]:
    """Each call id is executed at most once and recorded at most once as a function call."""
    runs = Counter(ex.call_id for ex in record.tool_executions)
    for call_id, n in runs.items():
        if n > 1:
            times = [record.t(ex.started_at) for ex in record.tool_executions
                     if ex.call_id == call_id]
            yield f"call {call_id} was executed {n} times (at {times})"
    calls = Counter(i.call_id for i in record.history if isinstance(i, FunctionCall))
    for call_id, n in calls.items():
        if n > 1:
            yield f"call {call_id} appears {n} times in the history"


def tool_calls_answered_once(record: ConversationRecord) -> Iterable[str]:
    """After close, every function call in the history has exactly one output with its call
    id, and every output has its call."""
    calls = {i.call_id: i for i in record.history if isinstance(i, FunctionCall)}
    outputs = Counter(i.call_id for i in record.history if isinstance(i, FunctionCallOutput))
    for call_id, call in calls.items():
        if outputs[call_id] != 1:
            yield (f"call {call_id} ({call.name}, made at {record.t(call.created_at):.2f}) has "
                   f"{outputs[call_id]} outputs in the history")
    for call_id in outputs:
        if call_id not in calls:
            yield f"output for call {call_id} has no function call in the history"


def executed_calls_recorded(record: ConversationRecord) -> Iterable[str]:
    """Every executed call is in the history once the session closed, answered (by the
    previous invariant) with its result or an error output: close cancels a tool, it does not
    lose it."""
    calls = {i.call_id for i in record.history if isinstance(i, FunctionCall)}
    for ex in record.tool_executions:
        if ex.call_id not in calls:
            yield (f"tool {ex.name} ({ex.call_id}) ran from {record.t(ex.started_at):.2f} to "
                   f"{record.t(ex.ended_at):.2f} ({ex.result}) but the history has no call "
                   "for it: its result was lost")


def llm_never_sees_unanswered_calls(record: ConversationRecord) -> Iterable[str]:
    """No LLM request holds a function call without its output."""
    for req in record.llm_requests:
        items = req.chat_ctx.items
        answered = {i.call_id for i in items if isinstance(i, FunctionCallOutput)}
        missing = [i.call_id for i in items if isinstance(i, FunctionCall)
                   and i.call_id not in answered]
        if missing:
            yield (f"LLM request r{req.number} at {record.t(req.at):.2f} holds calls without "
                   f"outputs: {missing}")


def assistant_messages_in_order(record: ConversationRecord) -> Iterable[str]:
    """The assistant messages of the history are in creation order."""
    messages = [i for i in record.history if isinstance(i, ChatMessage) and i.role == "assistant"]
    stamps = [m.created_at for m in messages]
    if stamps != sorted(stamps):
        yield ("assistant messages out of creation order: "
               f"{[(m.text_content, record.t(m.created_at)) for m in messages]}")


def one_speech_at_a_time(record: ConversationRecord) -> Iterable[str]:
    """The audio output plays one speech at a time: no speech captures audio while another
    speech's segment is still playing (the scheduler's rule, across agents and tasks)."""
    for at, segment_started in record.output_overlaps:
        yield (f"at {record.t(at):.2f} a second speech sent audio while the segment started at "
               f"{record.t(segment_started):.2f} was still playing")


DEFAULT_INVARIANTS: tuple[Invariant, ...] = (
    no_exception_escapes, close_is_last_event, close_within_grace, nothing_left_running,
    hooks_paired, tool_calls_executed_at_most_once, tool_calls_answered_once,
    executed_calls_recorded, llm_never_sees_unanswered_calls, assistant_messages_in_order,
    one_generation_per_input, every_quiet_input_answered, one_speech_at_a_time,
    conversation_settles,
)
"""The invariants ``check_conversation`` applies unless told otherwise."""


def violations(record: ConversationRecord, invariants: Sequence[Invariant]) -> list[str]:
    """Every violation the ``invariants`` find in ``record``, prefixed by the invariant."""
    found: list[str] = []
    for invariant in invariants:
        name = getattr(invariant, "__name__", repr(invariant))
        try:
            result = invariant(record)
            messages = [result] if isinstance(result, str) else list(result or ())
        except AssertionError as e:
            messages = [str(e) or "assertion failed"]
        found += [f"{name}: {m}" for m in messages]
    return found


def check_conversation(agent_factory: Callable[[], Agent], schedule: Schedule, *,
                       extra_invariants: Sequence[Invariant] = (),
                       invariants: Sequence[Invariant] = DEFAULT_INVARIANTS,
                       session_kwargs: dict[str, Any] | None = None,
                       prepare: Callable[[Any], Any] | None = None) -> ConversationRecord:
    """Run ``schedule`` against a fresh agent in virtual time and check the invariants.

    Synchronous (it calls ``trio.run`` with an autojumping ``MockClock``), so it can be the
    body of a Hypothesis test: ``@given(conversations(...))``. Inside a Trio test, await
    ``run_conversation`` and check with ``violations(record, DEFAULT_INVARIANTS)`` instead.
    Under Hypothesis, Trio's scheduler (the order of the tasks ready at one instant) is
    seeded per example, so a failing example replays with the same interleaving. The seed is
    fixed unless the test draws ``st.random_module()``: draw it to vary the interleavings.

    Args:
        agent_factory: Builds the agent under test (once per call).
        schedule: The conversation.
        extra_invariants: Your own checks, each a function of the record returning None, a
            message or messages (or raising ``AssertionError``).
        invariants: The built-in checks to apply (default: all of ``DEFAULT_INVARIANTS``).
        session_kwargs, prepare: As for :func:`run_conversation`.

    Returns:
        The record of the run.

    Raises:
        ConversationViolation: an invariant was broken; the message explains which input,
            call id or agent, and when, followed by the schedule and the timeline.
    """
    record = trio.run(functools.partial(run_conversation, agent_factory, schedule,
                                        session_kwargs=session_kwargs, prepare=prepare),
                      clock=trio.testing.MockClock(autojump_threshold=0))
    found = violations(record, [*invariants, *extra_invariants])
    if found:
        raise ConversationViolation(found, record)
    return record


__all__ = ["DEFAULT_INVARIANTS", "ConversationViolation", "Invariant", "QuietInput",
           "assistant_messages_in_order", "check_conversation", "close_is_last_event",
           "close_within_grace", "conversation_settles", "every_quiet_input_answered",
           "executed_calls_recorded", "hooks_paired", "llm_never_sees_unanswered_calls",
           "no_exception_escapes", "nothing_left_running", "one_generation_per_input",
           "one_speech_at_a_time", "quiet_inputs", "tool_calls_answered_once",
           "tool_calls_executed_at_most_once", "violations"]
