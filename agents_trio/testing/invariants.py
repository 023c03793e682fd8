"""The invariants every conversation must keep, and ``check_conversation`` to check them.

An invariant is a function of a :class:`ConversationRecord` returning the violations it
found: None, a message, or an iterable of messages (raising ``AssertionError`` counts as a
message too). Each built-in invariant below states exactly what it checks.
"""

from __future__ import annotations

import functools
import math
import re
import sys
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import trio
import trio.testing

from ..agent import Agent
from ..chat import ChatMessage, FunctionCall, FunctionCallOutput
from .conversation import ActionOutcome, ConversationRecord, run_conversation
from .schedules import (OutputFault, PushFault, Reply, RunInput, Schedule, StreamFault,
                        TextInput, UserSpeech)
from .scripted_models import LLMRequest, request_number

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

Invariant = Callable[[ConversationRecord], "None | str | Iterable[str]"]

_CALL_ID = re.compile(r"c(\d+)_\d+\Z")


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

def _commit_times(record: ConversationRecord) -> dict[str, float]:
    """Item id -> the time its ``conversation_item_added`` was emitted."""
    return {ev.item.id: at for ev, at in record.events_named("conversation_item_added")}


def _user_messages(record: ConversationRecord) -> list[ChatMessage]:
    return [i for i in record.history if isinstance(i, ChatMessage) and i.role == "user"]


def _describe_message(record: ConversationRecord, message: ChatMessage) -> str:
    at = _commit_times(record).get(message.id)
    return f"{message.text_content!r} (committed at {record.t(at):.2f})"


def _emitter(record: ConversationRecord, call_id: str) -> LLMRequest | None:
    match = _CALL_ID.match(call_id)
    if match is None:
        return None
    number = int(match.group(1))
    return record.llm_requests[number - 1] if 1 <= number <= len(record.llm_requests) else None


def _root(record: ConversationRecord, request: LLMRequest) -> LLMRequest:
    """The first request of the generation ``request`` continues (itself if it is one)."""
    while request.trigger == "tool_outputs":
        parent = _tool_reply_parent(record, request)
        if parent is None:
            break
        request = parent
    return request


def _tool_reply_parent(record: ConversationRecord, request: LLMRequest) -> LLMRequest | None:
    """The request whose tool calls ``request`` replies to: of the trailing outputs in its
    context, those of the newest step (older steps' outputs may be committed later)."""
    parents = [p for p in (_emitter(record, c) for c in request.trigger_ids) if p]
    return max(parents, key=lambda p: p.number, default=None)


def _visible_requests(record: ConversationRecord) -> set[int]:
    """Requests whose reply shows in the history (an assistant message or a tool call) or
    whose tool calls ran."""
    seen: set[int] = set()
    call_ids = [i.call_id for i in record.history if isinstance(i, FunctionCall)]
    call_ids += [ex.call_id for ex in record.tool_executions]
    for call_id in call_ids:
        parent = _emitter(record, call_id)
        if parent is not None:
            seen.add(parent.number)
    for item in record.history:
        if isinstance(item, ChatMessage) and item.role == "assistant":
            number = request_number(item.text_content)
            if number is not None:
                seen.add(number)
    return seen


def _agent_timeline(record: ConversationRecord) -> list[tuple[float, str]]:
    """(time, id of the agent that became current), from the handoff events."""
    return [(at, ev.item.new_agent_id) for ev, at in record.events_named("conversation_item_added")
            if ev.item.type == "agent_handoff"]


def _switch_spans(record: ConversationRecord) -> list[tuple[float, float]]:
    """(from, to) in schedule seconds while the agent was being switched: from a tool step
    that hands off to the handoff (a draining agent drops turns and refuses replies; it
    waits for its running tools, forever if one hangs), and each instant of a handoff."""
    handoffs = [record.t(at) for at, _ in _agent_timeline(record)[1:]]
    spans = [(t, t) for t in handoffs]
    for ev, at in record.events_named("function_tools_executed"):
        if ev.has_agent_handoff:
            start = record.t(at)
            spans.append((start, min((t for t in handoffs if t >= start), default=math.inf)))
    return spans


def _agent_at(timeline: list[tuple[float, str]], at: float) -> str | None:
    current = None
    for t, agent_id in timeline:
        if t > at:
            break
        current = agent_id
    return current


# -- the invariants -----------------------------------------------------------------------------

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
    the shielded time of tools still running at the close."""
    start, end = record.close_requested_at, record.exited_at
    if start is None or end is None:
        return
    grace = record.schedule.close_grace
    depth = _stack_depth(record, start)
    shielded = sum(ex.plan.shield for ex in record.tool_executions
                   if ex.plan is not None and ex.started_at <= start
                   and (ex.ended_at is None or ex.ended_at > start))
    bound = grace * (depth + 1) + shielded
    if end - start > bound + 1e-6:
        yield (f"closing took {end - start:.2f} s (from {record.t(start):.2f}), more than "
               f"{bound:.2f} s (grace {grace:g} s x {depth + 1} levels + {shielded:g} s "
               f"shielded)")


def _stack_depth(record: ConversationRecord, at: float) -> int:
    entered: dict[int, int] = defaultdict(int)
    for hook in record.hook_calls:
        if hook.at <= at:
            entered[id(hook.agent)] += 1 if hook.hook == "on_enter" else -1
    return max(1, sum(1 for n in entered.values() if n > 0))


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


def conversation_settles(record: ConversationRecord) -> Iterable[str]:
    """Left alone, the agent finishes what it says: when nothing happened (no action, no
    fault) for a *settle window* before the close and no tool is running, every speech
    created before that quiet span is done by the close. A hanging audio output does not
    excuse a stuck speech (the agent must not stall on it); a hanging LLM or TTS stream does
    (the provider never answers; timeouts are the provider's)."""
    start = record.close_requested_at
    if start is None:
        return
    if any(ex.ended_at is None or ex.ended_at >= start for ex in record.tool_executions):
        return
    if any(not h.what.startswith("capture_frame") and (h.ended is None or h.ended >= start)
           for h in record.hangs):
        return
    schedule = record.schedule
    quiet_from = max([record.t0, *(record.t0 + a.at + getattr(a, "duration", 0.0)
                                   for a in schedule.actions),
                      *record.faults_fired.values()])
    window = _settle_window(schedule)
    if start - quiet_from < window:
        return
    created = {ev.speech_handle.id: at for ev, at in record.events_named("speech_created")}
    for handle in record.speech_handles:
        at = created.get(handle.id)
        if at is not None and at <= quiet_from and not _done_by(record, handle, start):
            yield (f"the speech {handle.id} ({handle.source}) created at {record.t(at):.2f} "
                   f"was still not done when the close came at {record.t(start):.2f}, after "
                   f"{start - quiet_from:.2f} s with nothing happening")


def _done_by(record: ConversationRecord, handle: Any, at: float) -> bool:
    done_at = record.speech_done_at.get(handle.id)
    return done_at is not None and done_at < at  # the close itself ends every speech


def _settle_window(schedule: Schedule) -> float:
    return _answer_window(schedule) + max(
        (_chain_time(r) for r in _replies(schedule)), default=0.0) + 2.0


def one_speech_at_a_time(record: ConversationRecord) -> Iterable[str]:
    """The audio output plays one speech at a time: no speech captures audio while another
    speech's segment is still playing (the scheduler's rule, across agents and tasks)."""
    for at, segment_started in record.output_overlaps:
        yield (f"at {record.t(at):.2f} a second speech sent audio while the segment started at "
               f"{record.t(segment_started):.2f} was still playing")


def one_generation_per_input(record: ConversationRecord) -> Iterable[str]:
    """Each user input is answered by at most one generation.

    A *generation* is an LLM request that answers a user message, instructions or anything
    but tool outputs (its root), plus the tool replies that continue it. It answers the user
    message its root answers: the last item of the root's context. Then:

    - a tool reply must not contain a user message that its root did not contain and that was
      committed to the same agent (the reply would answer that input too; messages of an
      AgentTask the tool awaited are merged legitimately);
    - at most one generation that shows in the history (an assistant message, a tool call)
      answers each user message (preemptive attempts that were dropped do not show);
    - the words of each input are committed in at most one user message.
    """
    for action in record.schedule.inputs():
        words = action.transcript if isinstance(action, UserSpeech) else action.text
        holding = [m for m in _user_messages(record) if words in (m.text_content or "")]
        if len(holding) > 1:
            yield (f"the input {words!r} at {action.at:.2f} was committed {len(holding)} times: "
                   f"{[_describe_message(record, m) for m in holding]}")
    users = {m.id: m for m in _user_messages(record)}
    commits = _commit_times(record)
    agents = _agent_timeline(record)
    visible = _visible_requests(record)
    answering: dict[str, set[int]] = defaultdict(set)
    for req in record.llm_requests:
        root = _root(record, req)
        if req is not root:
            agent = _agent_at(agents, root.at)
            seen = set(root.user_message_ids())
            for message_id in req.user_message_ids():
                message = users.get(message_id)
                commit = commits.get(message_id)
                if (message_id in seen or message is None or commit is None
                        or _agent_at(agents, commit) != agent):
                    continue
                yield (f"the tool reply r{req.number} (at {record.t(req.at):.2f}, continuing "
                       f"r{root.number}) contains the input {_describe_message(record, message)}"
                       f", which r{root.number} did not see: that input is answered inside "
                       "another input's generation")
        elif req.trigger == "user" and _chain_visible(record, root, visible):
            answering[req.trigger_ids[0]].add(root.number)
    for message_id, roots in answering.items():
        if len(roots) > 1 and message_id in users:
            yield (f"the input {_describe_message(record, users[message_id])} is answered by "
                   f"{len(roots)} generations: {['r%d' % n for n in sorted(roots)]}")


def _chain_visible(record: ConversationRecord, root: LLMRequest, visible: set[int]) -> bool:
    return any(_root(record, record.llm_requests[n - 1]) is root for n in visible)


@dataclass(frozen=True)
class QuietInput:
    """An input that had time to be answered (see ``every_quiet_input_answered``): nothing
    else happened from ``start - 1`` to ``end`` (schedule seconds)."""

    action: UserSpeech | TextInput | RunInput
    outcome: ActionOutcome
    start: float
    end: float

    @property
    def words(self) -> str:
        action = self.action
        return action.transcript if isinstance(action, UserSpeech) else action.text


def quiet_inputs(record: ConversationRecord) -> list[QuietInput]:
    """The inputs ``every_quiet_input_answered`` checks (to measure how many a test covers)."""
    schedule = record.schedule
    if record.close_requested_at is None:
        return []
    closes = [at for _, at in record.events_named("close")]
    close_at = record.t(min(closes)) if closes else schedule.close_at
    switches = _switch_spans(record)
    window = _answer_window(schedule)
    outcomes = {id(o.action): o for o in record.actions}
    out: list[QuietInput] = []
    for action in schedule.inputs():
        outcome = outcomes.get(id(action))
        if outcome is None or outcome.error is not None:
            continue  # refused (the agent drains, a run is active) or failed: documented
        start = action.at
        committed_by = start if not isinstance(action, UserSpeech) else (
            action.at + action.duration + 1.5)
        end = committed_by + window
        if isinstance(action, RunInput):
            end += _chain_time(action.reply) + 5.0
        others = [a.at for a in schedule.actions if a is not action]
        if (any(start - 1.0 <= t <= end for t in others) or end >= close_at
                or any(a <= committed_by and b >= start - 1.0 for a, b in switches)
                or any(record.t(h.started) <= end and (h.ended is None or record.t(h.ended)
                                                       >= start - 1.0) for h in record.hangs)
                or (isinstance(action, RunInput) and _hangs_tools(action.reply))
                or _fault_blocks(record, action, start, end)):
            continue
        out.append(QuietInput(action=action, outcome=outcome, start=start, end=end))
    return out


def every_quiet_input_answered(record: ConversationRecord) -> Iterable[str]:
    """An input with time to be answered is answered, and a ``session.run`` with time to
    settle returns.

    An input has time when nothing else happens around it: no other action from 1 s before
    it to the end of its *answer window*, no agent switch (from a tool step handing off to
    the handoff) from 1 s before it until its turn is committed (a draining agent drops
    turns), no fault that stops a model
    from hearing or speaking (hangs anywhere, a failing LLM/TTS reply to it, an STT/VAD fault
    in the preceding second or any non-provider error before it), and no close before the
    window ends. The window starts when the turn is committed (text: at once; speech: 1.5 s
    after its end) and lasts long enough for one queued tool reply and the input's own reply
    to start playing (a run: also for its tool rounds). Answered means: a user message holding
    the input's words is committed and a generation answering it shows in the history.
    """
    visible = _visible_requests(record)
    users = _user_messages(record)
    commits = _commit_times(record)
    for quiet in quiet_inputs(record):
        words, start, end = quiet.words, quiet.start, quiet.end
        message = next((m for m in users if words in (m.text_content or "")
                        and start - 1e-6 <= record.t(commits.get(m.id, record.t0 - 1.0)) <= end),
                       None)
        if message is None:
            yield (f"the input {words!r} at {start:.2f} was never committed as a user message "
                   f"(nothing else happened until {end:.2f})")
            continue
        answered = any(req.trigger == "user" and req.trigger_ids[0] == message.id
                       and _chain_visible(record, req, visible) for req in record.llm_requests)
        if not answered:
            yield (f"the input {_describe_message(record, message)} was never answered "
                   f"(nothing else happened until {end:.2f})")
        ended = quiet.outcome.ended_at
        if isinstance(quiet.action, RunInput) and (ended is None or record.t(ended) > end):
            yield (f"session.run({words!r}) at {start:.2f} did not return by {end:.2f} "
                   f"(returned at {record.t(ended):.2f})")


def _replies(schedule: Schedule) -> list[Reply]:
    out: list[Reply] = []
    pending = [a.reply for a in schedule.inputs()] + [schedule.greeting]
    while pending:
        reply = pending.pop()
        out.append(reply)
        pending += [c.reply for c in reply.calls if c.reply is not None]
    return out


def _hangs_tools(reply: Reply) -> bool:
    """Whether the tool rounds of ``reply`` may hang (a run waits for them)."""
    return any(c.outcome == "hang" or _hangs_tools(c.reply or Reply()) for c in reply.calls)


def _answer_window(schedule: Schedule) -> float:
    replies = _replies(schedule)
    longest = max((r.duration + r.tts_ttfb + r.audio for r in replies), default=0.0)
    slowest = max((r.duration + r.tts_ttfb for r in replies), default=0.0)
    return longest + slowest + 1.5


def _chain_time(reply: Reply) -> float:
    own = reply.duration + reply.tts_ttfb + reply.audio
    calls = [c.latency + c.shield + _chain_time(c.reply or Reply()) for c in reply.calls]
    return own + max(calls, default=0.0)


def _fault_blocks(record: ConversationRecord, action: Any, start: float, end: float) -> bool:
    """Whether a fault may keep ``action`` from being heard or answered: its own reply fails,
    the output failed, or recognition failed around it (for good after a non-provider
    error, documented to stop recognition)."""
    if action.reply.llm_fault is not None or action.reply.tts_fault is not None:
        return True
    for fault, fired in record.faults_fired.items():
        at = record.t(fired)
        if isinstance(fault, OutputFault) and start - 1.0 <= at <= end:
            return True
        if isinstance(fault, (StreamFault, PushFault)):
            if fault.kind == "error" and at <= end:
                return True
            if start - 1.0 <= at <= end:
                return True
    return False


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
    body of a Hypothesis test: ``@given(conversations(...))``.

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


__all__ = ["DEFAULT_INVARIANTS", "ConversationViolation", "Invariant", "assistant_messages_in_order",
           "check_conversation", "close_is_last_event", "conversation_settles", "close_within_grace",
           "every_quiet_input_answered", "executed_calls_recorded", "hooks_paired", "llm_never_sees_unanswered_calls",
           "no_exception_escapes", "nothing_left_running", "one_generation_per_input",
           "one_speech_at_a_time", "QuietInput",
           "quiet_inputs",
           "tool_calls_answered_once", "tool_calls_executed_at_most_once", "violations"]
