"""The adversarial model against TaskGroups: the front desk's ``intake`` tool (or the intake
agent's ``on_enter``) awaits a TaskGroup of two steps, each an AgentTask that completes from a
tool, and the later step offers ``out_of_scope`` back to the earlier one. Random
conversations with model faults, interruptions, handoffs from inside a step and a close at a
random moment must keep ``DEFAULT_INVARIANTS`` (each input answered once, each call answered
exactly once, hooks paired, close within grace, nothing left running), and the group's
awaiter gets one outcome at most: a result that holds every step, or an error.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from adversary_agents import CLOSE_TOOLS, SILENT, TOOLS, CloseTools, Desk, Farewells, Polite, Sales
from agents_trio import AgentTask, RunContext, TaskGroup, TaskGroupResult, function_tool
from agents_trio.testing import (DEFAULT_INVARIANTS, ConversationRecord, Reply, Schedule, TextInput,
                                 ToolCall, UserSpeech, check_conversation)
from agents_trio.testing.strategies import conversations
from test_adversarial import PROPERTY, _observe
from test_adversarial_goodbyes import MODES, goodbye_schedules, run_with_goodbyes

STEP_IDS = ("name", "reason")

_INSTANT = {"ttft": 0.0, "duration": 0.0, "tts_ttfb": 0.0, "audio": 0.2}

GROUP_TOOLS: dict[str, Any] = {
    "intake": {},
    "finish": {"value": "42"},
    # the LLM may name a step that is not earlier (or none): the tool answers with an error
    "out_of_scope": st.fixed_dictionaries({"task_ids": st.lists(
        st.sampled_from([*STEP_IDS, "nothing"]), min_size=0, max_size=2)}),
    "escalate": TOOLS["escalate"],
    "transfer": TOOLS["transfer"],
    "back": TOOLS["back"],
    "lookup": TOOLS["lookup"],
}


class Step(Polite, CloseTools, AgentTask[str]):
    """One intake step: asks, and completes when the LLM calls ``finish``."""

    def __init__(self, step_id: str, journal: list[str], farewells: Farewells = SILENT) -> None:
        super().__init__(instructions=f"Ask for the caller's {step_id}.", id=step_id)
        self.journal = journal
        self.farewells = farewells

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions=f"ask for the {self.id}")

    @function_tool
    async def finish(self, ctx: RunContext, value: str) -> None:
        """Record the answer.

        Args:
            value: The answer
        """
        self.complete(f"{self.id}={value}")

    @function_tool
    async def escalate(self, ctx: RunContext) -> Any:
        """Hand the caller over to sales."""
        return Sales(farewells=self.farewells), "escalating to sales"


class PoliteGroup(Polite, TaskGroup):
    """A TaskGroup that says goodbye in its ``on_exit`` too."""

    def __init__(self, farewells: Farewells, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.farewells = farewells


def _group(journal: list[str], on_completed: str, farewells: Farewells = SILENT,
           summarize: bool = False) -> TaskGroup:
    async def completed_async(ev: Any) -> None:
        journal.append(f"completed {ev.task_id}")

    def completed_raises(ev: Any) -> None:
        raise RuntimeError(f"the callback failed after {ev.task_id}")  # the group fails

    callbacks = {"none": None, "sync": lambda ev: journal.append(f"completed {ev.task_id}"),
                 "async": completed_async, "raises": completed_raises}
    group = PoliteGroup(farewells, summarize_chat_ctx=summarize,
                        on_task_completed=callbacks[on_completed])
    for step_id in STEP_IDS:
        group.add(lambda step_id=step_id: Step(step_id, journal, farewells), id=step_id,
                  description=f"the caller's {step_id}")
    return group


def _outcome(journal: list[str], result: Any) -> str:
    """What the awaiter got, checked against the group's contract."""
    if not isinstance(result, TaskGroupResult) or set(result.task_results) != set(STEP_IDS):
        journal.append(f"bad result {result!r}")
    return f"intake: {result.task_results}"


class Intake(Desk):
    """The desk, awaiting the group of intake steps (``journal`` records each outcome)."""

    def __init__(self, journal: list[str], on_completed: str,
                 farewells: Farewells = SILENT, summarize: bool = False) -> None:
        super().__init__(journal=journal, farewells=farewells)
        self.on_completed = on_completed
        self.summarize = summarize

    async def await_group(self) -> str:
        try:
            result = await _group(self.journal, self.on_completed, self.farewells,
                                  self.summarize)
        except BaseException as e:
            self.journal.append(f"awaiter: {type(e).__name__} {e}")
            raise
        self.journal.append("awaiter: result")
        return _outcome(self.journal, result)


class IntakeDesk(Intake):
    """The desk, whose ``intake`` tool awaits the group."""

    @function_tool
    async def intake(self, ctx: RunContext) -> str:
        """Take the caller's name and reason."""
        return await self.await_group()


class IntakeOnEnter(Intake):
    """An agent whose ``on_enter`` greets and awaits the group at once."""

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet the user")
        await self.await_group()


def _one_outcome(journal: list[str]):
    def group_awaiter_answered_once(record: ConversationRecord) -> list[str]:
        """Each await of a group ends once, and a result holds every step."""
        problems = [entry for entry in journal if entry.startswith("bad result")]
        outcomes = [entry for entry in journal if entry.startswith("awaiter:")]
        starts = sum(1 for e in record.tool_executions if e.name == "intake")
        if record.hook_calls and isinstance(record.hook_calls[0].agent, IntakeOnEnter):
            starts += sum(1 for h in record.hook_calls
                          if isinstance(h.agent, IntakeOnEnter) and h.hook == "on_enter")
        if len(outcomes) > starts:
            problems.append(f"{len(outcomes)} outcomes for {starts} awaits: {outcomes}")
        return problems

    return group_awaiter_answered_once


# mostly the group's own tools, so that groups run through (and back) often; sometimes all
GROUP_CONVERSATIONS = st.one_of(
    conversations(tools={name: GROUP_TOOLS[name] for name in ("intake", "finish", "out_of_scope")},
                  min_calls=1, runs=True, audio_output=None, max_actions=10),
    conversations(tools=GROUP_TOOLS, min_calls=1, runs=True, audio_output=None, max_actions=8))


@settings(PROPERTY, max_examples=300)
@given(GROUP_CONVERSATIONS, st.sampled_from(["tool", "on_enter"]),
       st.sampled_from(["none", "sync", "async", "raises"]), st.booleans(),
       st.random_module())
def test_task_groups_keep_every_invariant(schedule: Schedule, where: str, on_completed: str,
                                          summarize: bool, _: object) -> None:
    """``summarize``: the group replaces its conversation with a summary at the end (made
    by the scripted LLM, LiveKit's default)."""
    journal: list[str] = []
    factory = IntakeDesk if where == "tool" else IntakeOnEnter
    record = check_conversation(lambda: factory(journal, on_completed, SILENT, summarize),
                                schedule,
                                invariants=DEFAULT_INVARIANTS,
                                extra_invariants=[_one_outcome(journal)])
    _observe(record)
    entered = {h.agent.id for h in record.hook_calls if h.hook == "on_enter"}
    event(f"steps entered: {len(entered & set(STEP_IDS))}")
    event(f"out_of_scope executed: {any(e.name == 'out_of_scope' for e in record.tool_executions)}")
    event(f"group outcome: {next((e for e in journal if e.startswith('awaiter:')), 'none')}")


GOODBYE_GROUP_TOOLS = {**{name: GROUP_TOOLS[name]
                          for name in ("intake", "finish", "out_of_scope", "escalate")},
                       **CLOSE_TOOLS}


@settings(PROPERTY, max_examples=150)
@given(goodbye_schedules(GOODBYE_GROUP_TOOLS, min_calls=1), st.sampled_from(MODES),
       st.sampled_from(["tool", "on_enter"]), st.booleans(), st.random_module())
def test_task_group_goodbyes_and_closes(schedule: Schedule, mode: Any, where: str,
                                         summarize: bool, _: object) -> None:
    """Every agent, step and the group say goodbye in ``on_exit``; a step may close the
    session from a tool: the goodbye invariants hold too (each plays or is cut once, none
    refused, the close within its bound)."""
    journals: list[list[str]] = []

    def agent(farewells: Farewells, journal: list[str]) -> Desk:
        journals.append(journal)
        factory = IntakeDesk if where == "tool" else IntakeOnEnter
        return factory(journal, "async", farewells, summarize)

    def one_outcome(record: ConversationRecord) -> list[str]:
        return _one_outcome(journals[0])(record)

    run_with_goodbyes(schedule, mode, agent=agent, extra=[one_outcome])


# -- reproducers of the bugs the model found ------------------------------------------------

@settings(PROPERTY, max_examples=10)
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_pause_for_a_task_drops_the_parent_s_preemptive_reply(_: object) -> None:
    """Fuzz find: the user's final transcript started a preemptive reply on the desk in the
    instant its ``on_enter`` awaited the group (after its greeting) and the desk paused. The
    turn ended under the group (held, and answered by it), but the desk's preemptive reply
    was never taken or dropped: a speech left created until the close. LiveKit's pause drops
    a parked preemptive generation."""
    finish = ToolCall(name="finish", arguments='{"value": "42"}')
    schedule = Schedule(
        actions=(UserSpeech(at=3.0, duration=0.1, transcript="hello there (0)", stt_delay=0.0,
                            reply=Reply(text="okay.", calls=(finish,), **_INSTANT)),),
        greeting=Reply(text="okay.", calls=(finish,), **{**_INSTANT, "audio": 3.15}),
        close_at=14.3, audio_output=True, can_pause_audio=False, preemptive=True,
        close_grace=5.0)
    journal: list[str] = []
    check_conversation(lambda: IntakeOnEnter(journal, "none"), schedule,
                       invariants=DEFAULT_INVARIANTS, extra_invariants=[_one_outcome(journal)])
    assert journal == ["awaiter: result"]


@settings(PROPERTY, max_examples=10)
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_step_escalating_leaves_the_group_and_the_agent_that_awaited_it(_: object) -> None:
    """Fuzz find: the first step's greeting hands off to sales from its tool. The handoff
    drains the step, gives the floor back to the group for its goodbye, and then should do
    the same for the desk whose ``on_enter`` awaited the group. But the group, told its step
    was replaced, completed itself with the error: it left the session's task stack before
    the handoff asked who had awaited it, so the handoff took the group for the agent at the
    bottom. Sales entered with the desk still paused under it, and the desk's ``on_exit``
    ran only at the close, where its goodbye was refused."""
    escalate = ToolCall(name="escalate")
    schedule = Schedule(greeting=Reply(text="okay.", calls=(escalate,), **_INSTANT),
                        close_at=10.0, audio_output=False, preemptive=False, close_grace=0.5)
    journals: list[list[str]] = []

    def agent(farewells: Farewells, journal: list[str]) -> Desk:
        journals.append(journal)
        return IntakeOnEnter(journal, "none", farewells)

    record = run_with_goodbyes(schedule, "say", agent=agent)
    handoffs = [(h.old_agent_id, h.new_agent_id) for h in record.history
                if getattr(h, "type", None) == "agent_handoff"]
    assert handoffs == [(None, "desk"), ("desk", "polite_group"), ("polite_group", "name"),
                        ("name", "polite_group"), ("polite_group", "desk"), ("desk", "sales")]
    exits = [h.agent.id for h in record.hook_calls if h.hook == "on_exit"]
    assert exits[:3] == ["name", "polite_group", "desk"], exits


@settings(PROPERTY, max_examples=10)
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_step_held_by_shielded_work_at_the_close_leaves_the_goodbyes_below_it(
        _: object) -> None:
    """Fuzz find: the step's reply asked for sales and for a hang-up whose tool stayed
    shielded from cancellation 0.95 s past the close (grace 0.5 s). The unwinding gave up
    on the step after its grace, so the group's and the desk's ``on_exit`` ran after
    ``close``, where their goodbyes were refused. Now the unwinding waits for the step
    (the close cannot end before shielded work anyway) and they say goodbye."""
    escalate = ToolCall(name="escalate", shield=0.35)
    hang_up = ToolCall(name="hang_up", latency=1.0, shield=0.95)
    schedule = Schedule(
        actions=(UserSpeech(at=0.5, duration=0.1, transcript="hello there (0)", stt_delay=0.0,
                            reply=Reply(text="okay.", calls=(escalate, hang_up),
                                        **{**_INSTANT, "duration": 0.4})),),
        greeting=Reply(text="sure, one moment.", calls=(ToolCall(name="escalate", latency=0.05,
                                                                 shield=0.6),),
                       **{**_INSTANT, "duration": 0.25}),
        close_at=2.5, audio_output=False, preemptive=False, close_grace=0.5)
    record = run_with_goodbyes(schedule, "say",
                               agent=lambda farewells, journal: IntakeOnEnter(
                                   journal, "async", farewells))
    exits = [h.agent.id for h in record.hook_calls if h.hook == "on_exit"]
    assert exits == ["name", "polite_group", "desk"], exits


def test_inputs_while_a_hanging_tool_holds_the_desk_s_drain_are_held_to_the_close() -> None:
    """Fuzz find (a harness calibration): the desk's greeting called a tool that never
    returns, then its ``on_enter`` awaited the group; a step's reply asked for sales. The
    handoff left the step, the group and then the desk, whose drain waits for its hanging
    tool (LiveKit's drain waits for running tools too), so sales never entered and the
    user's later turns were held until the close, which records them unanswered. The
    invariant ended the desk's switch at the handoff that gave it the floor back for its
    goodbye (the same instant as its ``on_exit``), and called the inputs unanswered."""
    back, escalate = ToolCall(name="back"), ToolCall(name="escalate")

    def speech(at: float, n: int) -> UserSpeech:
        return UserSpeech(at=at, duration=0.1, transcript=f"hello there ({n})", stt_delay=0.0,
                          reply=Reply(text="okay.", calls=(back,), **_INSTANT))

    schedule = Schedule(
        actions=(speech(0.5, 0), TextInput(at=0.7, text="hello there (1)", reply=Reply(
            text="okay.", calls=(back, escalate), **_INSTANT)), speech(3.7, 3), speech(5.0, 4)),
        greeting=Reply(text="okay.", calls=(ToolCall(name="transfer", outcome="hang"),),
                       **_INSTANT),
        close_at=8.4, audio_output=False, preemptive=False, close_grace=5.0)
    journal: list[str] = []
    record = check_conversation(lambda: IntakeOnEnter(journal, "none"), schedule,
                                invariants=DEFAULT_INVARIANTS,
                                extra_invariants=[_one_outcome(journal)])
    users = [i.text_content for i in record.history
             if getattr(i, "type", None) == "message" and i.role == "user"]
    assert {"hello there (3)", "hello there (4)"} <= set(users), users
    assert not any(h.agent.id == "sales" for h in record.hook_calls)


@settings(PROPERTY, max_examples=10)
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_group_that_fails_as_the_close_unwinds_its_step_still_says_goodbye(
        _: object) -> None:
    """Fuzz find, older than stop 39: the close came as the group had just started its
    second step. The unwinding said the step's goodbye and cancelled it; the group, told
    its step was cancelled, completed itself with the error, and its return stopped its
    activity at once (the session was closing), before the unwinding came to the group's
    goodbye: its ``on_exit`` ran in the cancellation, where its goodbye was refused (and
    the speech it created was left undone). A task that returns while the session closes
    now waits for the unwinding to take it: its goodbye, then its cancellation."""
    escalate = ToolCall(name="escalate", latency=3.45, outcome="raise_before")
    schedule = Schedule(
        actions=(UserSpeech(at=0.65, duration=2.85, transcript="hello there (0)",
                            stt_delay=0.0, reply=Reply(text="okay.", calls=(
                                ToolCall(name="escalate"),), **_INSTANT)),),
        greeting=Reply(text="okay.", calls=(escalate, ToolCall(
            name="finish", arguments='{"value": "42"}')), **{**_INSTANT, "duration": 0.15}),
        close_at=4.1, audio_output=False, preemptive=False, close_grace=0.5)
    record = run_with_goodbyes(schedule, "say",
                               agent=lambda farewells, journal: IntakeOnEnter(
                                   journal, "async", farewells))
    exits = [h.agent.id for h in record.hook_calls if h.hook == "on_exit"]
    assert exits == ["name", "reason", "polite_group", "desk"], exits
