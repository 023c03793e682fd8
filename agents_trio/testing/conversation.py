"""run_conversation: play a Schedule against your agent and record everything that happened.

The runner builds a session on the scripted models, *instruments* your agent (and every
agent that becomes current later: handoff targets, AgentTasks) — each tool is wrapped so the
schedule's latency and failures happen around your code and every execution is counted, and
``on_enter`` / ``on_exit`` are recorded — then performs the scheduled actions at their times,
closes the session at ``close_at``, and returns a :class:`ConversationRecord`.

Instrumentation replaces tools through ``Agent.update_tools`` and hooks as attributes of the
agent instance; your agent classes are not changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from ..agent import Agent
from ..chat import AgentHandoff, ChatItem, ChatMessage
from ..events import (AgentStateChangedEvent, CloseEvent, ConversationItemAddedEvent, ErrorEvent,
                      FunctionToolsExecutedEvent, SpeechCreatedEvent, UserInputTranscribedEvent,
                      UserStateChangedEvent)
from ..run_context import RunContext
from ..session import AgentSession
from ..speech_handle import SpeechHandle
from .._errors import ToolError
from ..tools import FunctionTool, function_tool, parse_arguments
from ..toolsets import flatten_tools
from .fake_io import FakeAudioInput, FakeTextOutput
from .schedules import (Action, InputFault, Interrupt, PushFault, RunInput, Schedule,
                        TextInput, ToolCall, UserSpeech)
from .harness import merge_turn_handling
from .scripted_models import (Hang, LLMRequest, ScriptedAudioOutput, ScriptedLLM, ScriptedSTT,
                              ScriptedTTS, ScriptedVAD, UserAudioScript, fault_error,
                              stream_counts)

SESSION_EVENTS = ("agent_state_changed", "user_state_changed", "user_input_transcribed",
                  "conversation_item_added", "function_tools_executed", "metrics_collected",
                  "speech_created", "agent_false_interruption", "error", "close")

TURN_HANDLING: dict[str, Any] = {
    "endpointing": {"min_delay": 0.5, "max_delay": 6.0},
    "interruption": {"min_duration": 0.5, "false_interruption_timeout": 2.0},
}


@dataclass
class ToolExecution:
    """One execution of an instrumented tool.

    Attributes:
        call_id, name: The call executed.
        agent_id: The agent whose tool it is.
        started_at, ended_at: Trio times (``ended_at`` is None while it runs).
        plan: The schedule's behaviour for the call (None if the LLM call was not planned).
        result: ``returned``, ``raised <Type>``, or ``cancelled``.
    """

    call_id: str
    name: str
    agent_id: str
    started_at: float
    plan: ToolCall | None
    ended_at: float | None = None
    result: str = "running"


@dataclass
class HookCall:
    """``on_enter`` or ``on_exit`` of one agent instance was called at ``at``."""

    agent: Agent
    hook: str
    at: float


@dataclass
class ActionOutcome:
    """A scheduled action as performed: when, and the error it raised (if any)."""

    action: Action
    at: float
    error: BaseException | None = None
    ended_at: float | None = None  # a run: when ``session.run`` returned or raised


@dataclass
class ConversationRecord:
    """Everything a run recorded; invariants read it.

    Times are Trio times; ``t(x)`` turns one into schedule time (seconds from ``t0``).
    """

    schedule: Schedule
    t0: float = 0.0
    events: list[tuple[str, Any, float]] = field(default_factory=list)
    history: list[ChatItem] = field(default_factory=list)
    llm_requests: list[LLMRequest] = field(default_factory=list)
    tool_executions: list[ToolExecution] = field(default_factory=list)
    hook_calls: list[HookCall] = field(default_factory=list)
    hangs: list[Hang] = field(default_factory=list)
    faults_fired: dict[InputFault, float] = field(default_factory=dict)
    output_overlaps: list[tuple[float, float]] = field(default_factory=list)
    speech_handles: list[SpeechHandle] = field(default_factory=list)
    speech_done_at: dict[str, float] = field(default_factory=dict)
    actions: list[ActionOutcome] = field(default_factory=list)
    close_requested_at: float | None = None
    close_returned_at: float | None = None
    exited_at: float | None = None
    escaped: BaseException | None = None
    timed_out: bool = False
    leftover_tasks: list[str] = field(default_factory=list)
    open_streams: dict[str, int] = field(default_factory=dict)
    session: AgentSession | None = None

    def t(self, time: float | None) -> float:
        return math.nan if time is None else round(time - self.t0, 3)

    def events_named(self, name: str) -> list[tuple[Any, float]]:
        return [(ev, at) for n, ev, at in self.events if n == name]

    def timeline(self, *, limit: int = 200) -> str:
        """The recorded events, one per line, in schedule time (VAD metrics left out)."""
        lines = []
        for name, ev, at in self.events:
            if name == "metrics_collected":
                continue
            detail = _event_detail(ev)
            lines.append(f"{self.t(at):8.2f} {name} {detail}")
        for ex in self.tool_executions:
            lines.append(f"{self.t(ex.started_at):8.2f} tool {ex.name} {ex.call_id} "
                         f"[{ex.agent_id}] -> {ex.result} at {self.t(ex.ended_at):.2f}")
        for req in self.llm_requests:
            lines.append(f"{self.t(req.at):8.2f} LLM request r{req.number} answers "
                         f"{req.trigger} {list(req.trigger_ids)} -> {req.ended}, calls "
                         f"{req.call_ids}")
        for hook in self.hook_calls:
            lines.append(f"{self.t(hook.at):8.2f} {hook.agent.id}.{hook.hook}")
        for outcome in self.actions:
            if outcome.error is not None or outcome.ended_at is not None:
                result = (f"raised {outcome.error!r}" if outcome.error is not None
                          else "returned")
                lines.append(f"{self.t(outcome.at):8.2f} action {type(outcome.action).__name__}"
                             f" {result} at {self.t(outcome.ended_at or outcome.at):.2f}")
        for fault, at in self.faults_fired.items():
            lines.append(f"{self.t(at):8.2f} fault: {fault!r}")
        for hang in self.hangs:
            lines.append(f"{self.t(hang.started):8.2f} hang: {hang.what} (until "
                         f"{self.t(hang.ended):.2f})")
        lines.sort(key=lambda line: float(line.split()[0]))
        if len(lines) > limit:
            lines = lines[:limit // 2] + ["   ..."] + lines[-limit // 2:]
        return "\n".join(lines)


def _event_detail(ev: object) -> str:
    if isinstance(ev, ConversationItemAddedEvent):
        item = ev.item
        if isinstance(item, ChatMessage):
            return f"{item.role} {item.text_content!r} ({item.id})"
        if isinstance(item, AgentHandoff):
            return f"{item.type} {item.old_agent_id} -> {item.new_agent_id}"
        return item.type
    if isinstance(ev, (AgentStateChangedEvent, UserStateChangedEvent)):
        return f"{ev.old_state} -> {ev.new_state}"
    if isinstance(ev, UserInputTranscribedEvent):
        return f"{ev.transcript!r} final={ev.is_final}"
    if isinstance(ev, FunctionToolsExecutedEvent):
        return ", ".join(f"{c.name} {c.call_id} -> {o.output[:40]!r}" if o else
                         f"{c.name} {c.call_id} -> (no output)"
                         for c, o in zip(ev.function_calls, ev.function_call_outputs))
    if isinstance(ev, SpeechCreatedEvent):
        return f"{ev.speech_handle.id} source={ev.source}"
    if isinstance(ev, ErrorEvent):
        return repr(ev.error)
    if isinstance(ev, CloseEvent):
        return f"reason={ev.reason} error={ev.error!r}"
    return ""


class _Instrument:
    """Wraps the tools and hooks of every agent that becomes current."""

    def __init__(self, record: ConversationRecord, llm: ScriptedLLM) -> None:
        self._record = record
        self._llm = llm
        self._seen: dict[int, Agent] = {}

    def agent(self, agent: Agent) -> None:
        if id(agent) in self._seen:
            return
        self._seen[id(agent)] = agent
        for hook in ("on_enter", "on_exit"):
            setattr(agent, hook, self._hook(agent, hook, getattr(agent, hook)))
        _run_now(agent.update_tools([self._tool(agent, t) if isinstance(t, FunctionTool) else t
                                     for t in flatten_tools(agent.tools)]))

    def _hook(self, agent: Agent, name: str, original: Callable[[], Any]) -> Callable[[], Any]:
        record = self._record

        async def hook() -> None:
            record.hook_calls.append(HookCall(agent=agent, hook=name, at=trio.current_time()))
            await original()

        return hook

    def _tool(self, agent: Agent, tool: FunctionTool) -> FunctionTool:
        record, llm = self._record, self._llm

        async def instrumented(ctx: RunContext[Any], raw_arguments: dict[str, Any]) -> object:
            call = ctx.function_call
            plan = llm.plan_for_call(call.call_id)
            execution = ToolExecution(call_id=call.call_id, name=call.name, agent_id=agent.id,
                                      started_at=trio.current_time(), plan=plan)
            record.tool_executions.append(execution)
            try:
                value = await _perform(tool, ctx, raw_arguments, plan)
                execution.result = "returned"
                return value
            except trio.Cancelled:
                execution.result = "cancelled"
                raise
            except BaseException as e:
                execution.result = f"raised {type(e).__name__}"
                raise
            finally:
                execution.ended_at = trio.current_time()

        schema: dict[str, Any] = {"name": tool.name, "description": tool.description,
                                  "parameters": tool.parameters_schema}
        return function_tool(raw_schema=schema, flags=tool.flags,
                             on_duplicate=tool.on_duplicate,
                             duplicate_scope=tool.duplicate_scope)(instrumented)


async def _perform(tool: FunctionTool, ctx: RunContext[Any], raw_arguments: dict[str, Any],
                   plan: ToolCall | None) -> object:
    """Run ``tool`` the way the schedule says (latency, failure, shielded time)."""
    if plan is not None:
        await trio.sleep(plan.latency)
        if plan.outcome == "hang":
            await trio.sleep_forever()
        if plan.outcome == "raise_before":
            raise fault_error("error", f"tool {tool.name} before running")
        if plan.outcome == "tool_error":
            raise ToolError(f"injected tool error in {tool.name}")
    kwargs = parse_arguments(tool, json.dumps(raw_arguments))
    kwargs.update(dict.fromkeys(tool.context_params, ctx))
    value = await tool(**kwargs)
    if plan is not None:
        if plan.shield:
            with trio.CancelScope(shield=True):
                await trio.sleep(plan.shield)
        if plan.outcome == "raise_after":
            raise fault_error("error", f"tool {tool.name} after running")
    return value


def _run_now(coro: Coroutine[Any, Any, object]) -> None:
    """Run a coroutine that never suspends (``Agent.update_tools``) from sync code."""
    try:
        coro.send(None)
    except StopIteration:
        return
    coro.close()
    raise RuntimeError("expected a coroutine that completes without suspending")


def watch_session(session: AgentSession, record: ConversationRecord) -> None:
    """Record ``session``'s events and speech handles into ``record`` (register before the
    session starts). ``run_conversation`` does this; use it to check the invariants of a
    session you drive yourself (a realtime model, say)."""
    def recorder(name: str) -> Callable[[object], None]:
        def record_event(ev: object) -> None:
            record.events.append((name, ev, trio.current_time()))
        return record_event

    for name in SESSION_EVENTS:
        session.on(name, recorder(name))

    def on_speech(ev: SpeechCreatedEvent) -> None:
        record.speech_handles.append(ev.speech_handle)
        ev.speech_handle.add_done_callback(
            lambda h: record.speech_done_at.setdefault(h.id, trio.current_time()))

    session.on("speech_created", on_speech)


def live_tasks() -> set[trio.lowlevel.Task]:
    """Every task of the current Trio run (compare before and after a session)."""
    return _all_tasks()


def _all_tasks() -> set[trio.lowlevel.Task]:
    tasks: set[trio.lowlevel.Task] = set()
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        if task is None:
            continue
        tasks.add(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return tasks


def _frame_times(schedule: Schedule) -> list[float]:
    """When the runner pushes user audio: at the start of each speech and at every push-fault
    time, so each frame-side fault has a frame to fire on."""
    times = {a.at for a in schedule.actions if isinstance(a, UserSpeech)}
    times |= {f.at for f in schedule.faults if isinstance(f, PushFault)}
    return sorted(times)


def run_deadline(schedule: Schedule) -> float:
    """Virtual seconds a run may take before it counts as hung: the schedule, then a close
    bounded by a few graces and the shielded tool time."""
    shielded = sum(c.shield for c in _planned_calls(schedule))
    return schedule.close_at + 10 * schedule.close_grace + shielded + 30.0


def _planned_calls(schedule: Schedule) -> list[ToolCall]:
    out: list[ToolCall] = []
    replies = [a.reply for a in schedule.inputs()] + [schedule.greeting]
    if schedule.goodbye is not None:
        replies.append(schedule.goodbye)
    while replies:
        reply = replies.pop()
        for call in reply.calls:
            out.append(call)
            if call.reply is not None:
                replies.append(call.reply)
    return out


async def run_conversation(agent_factory: Callable[[], Agent], schedule: Schedule, *,
                           session_kwargs: dict[str, Any] | None = None,
                           prepare: Callable[[AgentSession], Any] | None = None
                           ) -> ConversationRecord:
    """Play ``schedule`` against a fresh agent from ``agent_factory`` and record the run.

    Must run under ``trio.testing.MockClock(autojump_threshold=0)`` (pytest-trio's
    ``autojump_clock``), or the schedule plays in real time.

    Args:
        agent_factory: Builds the agent (called once, inside the Trio run).
        schedule: What happens, and when.
        session_kwargs: Extra ``AgentSession`` arguments (``userdata``, ``max_tool_steps``,
            ``turn_handling`` keys merged over the runner's defaults, ...).
        prepare: Called with the session before it is entered (register your own probes).

    Returns:
        The record; nothing is checked here (see ``check_conversation``).

    Cancellation: cancelling the caller closes the session; the record is then incomplete.
    """
    record = ConversationRecord(schedule=schedule)
    script = UserAudioScript(schedule)
    llm = ScriptedLLM(schedule)
    tts, vad, stt = ScriptedTTS(llm), ScriptedVAD(script), ScriptedSTT(script)
    record.llm_requests = llm.requests
    record.hangs = llm.hangs
    record.faults_fired = script.fired
    kwargs = dict(session_kwargs or {})
    turn_handling = merge_turn_handling(TURN_HANDLING, {"preemptive_generation": {
        "enabled": schedule.preemptive}})
    turn_handling = merge_turn_handling(turn_handling, kwargs.pop("turn_handling", None))
    session = AgentSession(vad=vad, stt=stt, llm=llm, tts=tts, turn_handling=turn_handling,
                           close_grace=schedule.close_grace,
                           **{"aec_warmup_duration": None, **kwargs})
    record.session = session
    audio_in = FakeAudioInput()
    session.input.audio = audio_in
    if schedule.audio_output:
        audio_out = ScriptedAudioOutput(script, llm.hangs, can_pause=schedule.can_pause_audio)
        record.output_overlaps = audio_out.overlaps
        session.output.audio = audio_out
    session.output.transcription = FakeTextOutput()
    watch_session(session, record)
    instrument = _Instrument(record, llm)

    def on_item(ev: ConversationItemAddedEvent) -> None:
        if ev.item.type == "agent_handoff":
            instrument.agent(session.current_agent)  # before its on_enter is launched

    session.on("conversation_item_added", on_item)
    if prepare is not None:
        prepare(session)
    before = _all_tasks()
    try:
        with trio.fail_after(run_deadline(schedule)):
            agent = agent_factory()
            instrument.agent(agent)
            async with session:
                await session.start(agent)
                record.t0 = trio.current_time()
                script.start(record.t0)
                audio_in.push(0.1)
                await _play(session, schedule, record, audio_in)
            record.exited_at = trio.current_time()
    except trio.TooSlowError:
        record.timed_out = True
    except Exception as e:  # an exception escaped `async with session`
        record.escaped = e
    record.history = list(session.history.items)
    record.leftover_tasks = sorted(t.name for t in _all_tasks() - before)
    record.open_streams = stream_counts(llm, tts, vad, stt)
    return record


async def _play(session: AgentSession, schedule: Schedule, record: ConversationRecord,
                audio_in: FakeAudioInput) -> None:
    t0 = record.t0
    closed = trio.Event()
    if any(name == "close" for name, _, _ in record.events):
        closed.set()
    session.on("close", lambda _ev: closed.set())
    async with trio.open_nursery() as nursery:
        for at in _frame_times(schedule):
            nursery.start_soon(_push_at, audio_in, t0 + at)
        for action in schedule.actions:
            nursery.start_soon(_act, session, action, record)
        # the schedule's close, or the session's own close before it (asked for by a tool,
        # or after an unrecoverable error): the play ends there
        with trio.move_on_at(t0 + schedule.close_at):
            await closed.wait()
        record.close_requested_at = trio.current_time()
        await session.aclose()
        record.close_returned_at = trio.current_time()
        await trio.testing.wait_all_tasks_blocked()  # runs failed by the close finish now
        nursery.cancel_scope.cancel()


async def _push_at(audio_in: FakeAudioInput, at: float) -> None:
    await trio.sleep_until(at)
    audio_in.push(0.05)


async def _act(session: AgentSession, action: Action, record: ConversationRecord) -> None:
    await trio.sleep_until(record.t0 + action.at)
    outcome = ActionOutcome(action=action, at=trio.current_time())
    record.actions.append(outcome)
    if isinstance(action, UserSpeech):
        return  # the VAD and STT hear it
    try:
        if isinstance(action, Interrupt):
            session.interrupt(force=action.force)
        elif isinstance(action, TextInput):
            try:
                session.interrupt()
            except RuntimeError:
                pass  # the current speech does not allow interruptions: typed text waits
            session.generate_reply(user_input=action.text)
        elif isinstance(action, RunInput):
            try:
                await session.run(user_input=action.text)
            finally:
                outcome.ended_at = trio.current_time()
    except Exception as e:
        outcome.error = e


__all__ = ["ActionOutcome", "ConversationRecord", "HookCall", "ToolExecution", "live_tasks",
           "run_conversation", "run_deadline", "watch_session"]
