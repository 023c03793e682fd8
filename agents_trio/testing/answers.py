"""The invariants about answers: each user input answered by exactly one generation, inputs
with time to be answered are answered, and the agent settles when left alone.

They read the scripted LLM's requests (``LLMRequest``: what each request answers, the calls it
made) together with the history; ``invariants.py`` explains the record and lists them all.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ..chat import INSTRUCTIONS_ID, ChatMessage, FunctionCall
from ..speech_handle import SpeechHandle
from .conversation import ActionOutcome, ConversationRecord
from .schedules import (OutputFault, PushFault, Reply, RunInput, Schedule, StreamFault,
                        TextInput, UserSpeech)
from .scripted_models import LLMRequest, request_number

_CALL_ID = re.compile(r"c(\d+)_\d+\Z")


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


def _switch_spans(record: ConversationRecord) -> list[tuple[float, float]]:
    """(from, to) in schedule seconds while the agent was being switched: from a tool step
    that hands off to the next handoff, from an ``on_exit`` (a completed AgentTask leaving
    too) to the handoff away from that agent (a draining agent holds turns for the next one
    and refuses replies; it waits for its running tools, forever if one hangs; the floor
    may come back to it first, at the same instant, for its goodbye), and each instant of a
    handoff."""
    moves = [(record.t(at), ev.item.old_agent_id)
             for ev, at in record.events_named("conversation_item_added")
             if ev.item.type == "agent_handoff"][1:]
    handoffs = [t for t, _ in moves]
    spans = [(t, t) for t in handoffs]
    for ev, at in record.events_named("function_tools_executed"):
        if ev.has_agent_handoff:
            start = record.t(at)
            spans.append((start, min((t for t in handoffs if t >= start), default=math.inf)))
    for hook in record.hook_calls:
        if hook.hook == "on_exit":
            start = record.t(hook.at)
            spans.append((start, min((t for t, old in moves
                                      if t >= start and old == hook.agent.id),
                                     default=math.inf)))
    return spans


def _committed_to(record: ConversationRecord) -> dict[str, str | None]:
    """User message id -> the id of the agent that was current when it was committed (by the
    order of the events: a handoff and a message can share a Trio time)."""
    current: str | None = None
    out: dict[str, str | None] = {}
    for ev, _ in record.events_named("conversation_item_added"):
        if ev.item.type == "agent_handoff":
            current = ev.item.new_agent_id
        elif ev.item.role == "user":
            out[ev.item.id] = current
    return out


def _request_agent(record: ConversationRecord, request: LLMRequest) -> str | None:
    """The id of the agent that made ``request``, known by the instructions its context
    starts with (None if no entered agent has them)."""
    instructions = next((i.text_content for i in request.chat_ctx.items
                         if isinstance(i, ChatMessage) and i.id == INSTRUCTIONS_ID), None)
    for hook in record.hook_calls:
        if hook.agent.instructions == instructions:
            return hook.agent.id
    return None


# -- the invariants -----------------------------------------------------------------------------

def conversation_settles(record: ConversationRecord) -> Iterable[str]:
    """Left alone, the agent finishes what it says: when nothing happened (no action, no
    fault) for a *settle window* before the close, no tool is running and no AgentTask is
    waiting for the user, every speech created before that quiet span is done by the close.
    A hanging audio output does not excuse a stuck speech (the agent must not stall on it);
    a hanging LLM or TTS stream does (the provider never answers; timeouts are the
    provider's)."""
    start = record.close_requested_at
    if start is None:
        return
    if any(ex.ended_at is None or ex.ended_at >= start for ex in record.tool_executions):
        return
    if agents_entered(record, start) > 1:
        return  # an AgentTask waits for the user; its parent's queued speeches wait with it
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


def agents_entered(record: ConversationRecord, at: float) -> int:
    """How many agents had entered and not exited just before ``at`` (the agent stack's
    depth when, say, the close came: the hooks the close itself runs do not count)."""
    entered: dict[int, int] = defaultdict(int)
    for hook in record.hook_calls:
        if hook.at < at:
            entered[id(hook.agent)] += 1 if hook.hook == "on_enter" else -1
    return sum(1 for n in entered.values() if n > 0)


def _done_by(record: ConversationRecord, handle: SpeechHandle, at: float) -> bool:
    done_at = record.speech_done_at.get(handle.id)
    return done_at is not None and done_at < at  # the close itself ends every speech


def _settle_window(schedule: Schedule) -> float:
    return _answer_window(schedule) + max(
        (_chain_time(r) for r in _replies(schedule)), default=0.0) + 2.0


def one_generation_per_input(record: ConversationRecord) -> Iterable[str]:
    """Each user input is answered by at most one generation.

    A *generation* is an LLM request that answers a user message, instructions or anything
    but tool outputs (its root), plus the tool replies that continue it. It answers the user
    message its root answers: the last item of the root's context. Then:

    - a tool reply must not contain a user message that its root did not contain and that was
      committed while the root's agent was current (the reply would answer that input too;
      the messages of an AgentTask that the agent awaited meanwhile are merged legitimately);
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
    committed_to = _committed_to(record)
    visible = _visible_requests(record)
    answering: dict[str, set[int]] = defaultdict(set)
    for req in record.llm_requests:
        root = _root(record, req)
        if req is not root:
            agent = _request_agent(record, root)
            seen = set(root.user_message_ids())
            for message_id in req.user_message_ids():
                message = users.get(message_id)
                if (message_id in seen or message is None or agent is None
                        or committed_to.get(message_id) != agent):
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
    close_at = _close_at(record)
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
        during = [b for a, b in switches if a <= committed_by and b >= start - 1.0]
        if during and isinstance(action, UserSpeech):
            # spoken while the floor changed hands: the session holds the turn and the next
            # agent answers it once the handoff is done (after its greeting, perhaps)
            committed_by = max(committed_by, *during)
            end = committed_by + window + _chain_time(schedule.greeting)
            during = [b for a, b in switches if committed_by < a <= end]
        # another action from its start to its end (a user still speaking counts)
        others = [(a.at, a.at + (a.duration if isinstance(a, UserSpeech) else 0.0))
                  for a in schedule.actions if a is not action]
        if (any(a <= end and b >= start - 1.0 for a, b in others) or end >= close_at
                or during
                or any(record.t(h.started) <= end and (h.ended is None or record.t(h.ended)
                                                       >= start - 1.0) for h in record.hangs)
                or (isinstance(action, RunInput) and _hangs_tools(action.reply))
                or _fault_blocks(record, action, start, end)):
            continue
        out.append(QuietInput(action=action, outcome=outcome, start=start, end=end))
    return out


def _close_at(record: ConversationRecord) -> float:
    """When the close came (schedule seconds): when it was asked for (the close then
    interrupts the agent to let it say goodbye), or its event if that came first."""
    closes = [at for _, at in record.events_named("close")]
    if record.close_requested_at is not None:
        closes.append(record.close_requested_at)
    return record.t(min(closes)) if closes else record.schedule.close_at


def _run_due(record: ConversationRecord, quiet: QuietInput) -> float | None:
    """When the quiet run ``quiet`` must have returned; None when it may stay open until
    the close.

    A run watches each handoff asked for while it is open, the new agent's ``on_enter`` and
    the speeches made meanwhile (in LiveKit, ``update_agent`` and ``_update_activity_task``
    hand them to the active run), so agents whose greetings hand off again keep it open for
    as long as they go on: each switch that begins before the run is due moves its due time
    to when the new agent's greeting has had time to settle.
    """
    schedule = record.schedule
    after_switch = _answer_window(schedule) + _chain_time(schedule.greeting) + 5.0
    due = quiet.end
    for begun, handed in sorted(_switch_spans(record)):
        if quiet.start <= begun <= due:
            due = max(due, handed + after_switch)
    return due if due < _close_at(record) else None


def every_quiet_input_answered(record: ConversationRecord) -> Iterable[str]:
    """An input with time to be answered is answered, and a ``session.run`` with time to
    settle returns.

    An input has time when nothing else happens around it: no other action from 1 s before
    it to the end of its *answer window*, no agent switch (from a tool step handing off, or
    an ``on_exit``, to the handoff) from 1 s before it until its turn is committed (a
    draining agent holds turns for the next one), no fault that stops a model
    from hearing or speaking (hangs anywhere, a failing LLM/TTS reply to it, an STT/VAD fault
    in the preceding second or any non-provider error before it), and no close before the
    window ends. The window starts when the turn is committed (text: at once; speech: 1.5 s
    after its end) and lasts long enough for one queued tool reply and the input's own reply
    to start playing (a run: also for its tool rounds). Answered means: a user message holding
    the input's words is committed and a generation answering it shows in the history. A run
    follows the handoffs asked for while it is open: each moves the time it must return by
    (a chain of them that lasts until the close excuses it).
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
        due = _run_due(record, quiet) if isinstance(quiet.action, RunInput) else None
        if due is not None and (ended is None or record.t(ended) > due):
            yield (f"session.run({words!r}) at {start:.2f} did not return by {due:.2f} "
                   f"(returned at {record.t(ended):.2f})")


def _replies(schedule: Schedule) -> list[Reply]:
    out: list[Reply] = []
    pending = [a.reply for a in schedule.inputs()] + [schedule.greeting]
    if schedule.goodbye is not None:
        pending.append(schedule.goodbye)
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


def _fault_blocks(record: ConversationRecord, action: UserSpeech | TextInput | RunInput,
                  start: float, end: float) -> bool:
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


__all__ = ["QuietInput", "agents_entered", "conversation_settles", "every_quiet_input_answered",
           "one_generation_per_input", "quiet_inputs"]
