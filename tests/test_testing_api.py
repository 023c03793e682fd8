"""The public adversarial testing API: schedules, ``check_conversation``, the invariants and
the Hypothesis strategies, as a user meets them.

Every built-in invariant is shown to fail on a record with the defect it looks for (a clean
run, then one planted defect), so none of them passes vacuously; two planted mistakes in
agents (answering a turn twice, never answering) are caught end to end; and the README's
example — a booking agent with a check-then-act race — is found and shrunk by Hypothesis.
"""

from __future__ import annotations

import copy
import pathlib
import subprocess
import sys
import textwrap

import pytest
import trio
from hypothesis import HealthCheck, Phase, find, given, settings

from agents_trio import (Agent, ChatMessage, FunctionCall, RunContext, StopResponse,
                         function_tool)
from agents_trio.testing import (DEFAULT_INVARIANTS, ConversationRecord, ConversationViolation,
                                 Reply, Schedule, TextInput, ToolCall, UserSpeech,
                                 check_conversation, violations)
from agents_trio.testing import invariants as inv
from agents_trio.testing.strategies import conversations

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import ExceptionGroup

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "examples"))
from booking_race import (BookingAgent, RacyBookingAgent, Restaurant,  # noqa: E402
                          at_most_one_table)

INVARIANTS = DEFAULT_INVARIANTS
# replayed even with AGENTS_TRIO_FUZZ (tests/conftest.py): some of these tests check what
# Hypothesis finds and how far it shrinks it, which holds for one known seed, not for every one
QUICK = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                 phases=[Phase.explicit, Phase.generate, Phase.shrink],
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Helper(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You help.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet")

    @function_tool
    async def lookup(self, ctx: RunContext, topic: str) -> str:
        """Look something up.

        Args:
            topic: What
        """
        return f"{topic}: sunny"


SCHEDULE = Schedule(
    actions=(UserSpeech(at=1.0, duration=1.0, transcript="what's the weather (0)", reply=Reply(
                 text="let me look.", calls=(ToolCall(name="lookup",
                                                      arguments='{"topic": "weather"}',
                                                      latency=1.0),))),
             TextInput(at=12.0, text="thanks (1)")),
    close_at=30.0)


@pytest.fixture(scope="module")
def clean() -> ConversationRecord:
    return check_conversation(Helper, SCHEDULE)


# -- a clean run, and what the record holds -----------------------------------------------------

def test_a_clean_run_records_the_conversation(clean: ConversationRecord) -> None:
    assert [(h.agent.id, h.hook) for h in clean.hook_calls] == [("helper", "on_enter"),
                                                                 ("helper", "on_exit")]
    assert [(e.name, e.call_id, e.result) for e in clean.tool_executions] == [
        ("lookup", "c2_0", "returned")]
    assert clean.tool_executions[0].ended_at - clean.tool_executions[0].started_at == 1.0
    triggers = [r.trigger for r in clean.llm_requests]
    assert triggers == ["instructions", "user", "tool_outputs", "user"]
    users = [i.text_content for i in clean.history if isinstance(i, ChatMessage)
             and i.role == "user"]
    assert users == ["what's the weather (0)", "thanks (1)"]
    assert [q.words for q in inv.quiet_inputs(clean)] == ["what's the weather (0)",
                                                          "thanks (1)"]
    assert clean.events[-1][0] == "close"
    assert "LLM request r3 answers tool_outputs ['c2_0']" in clean.timeline()


# -- every invariant can fail ---------------------------------------------------------------------

def _planted(record: ConversationRecord, plant) -> ConversationRecord:
    broken = copy.copy(record)
    for name in ("events", "history", "tool_executions", "hook_calls", "llm_requests",
                 "leftover_tasks", "output_overlaps"):
        setattr(broken, name, list(getattr(record, name)))
    broken.speech_done_at = dict(record.speech_done_at)
    plant(broken)
    return broken


def _duplicate_execution(r: ConversationRecord) -> None:
    r.tool_executions.append(copy.copy(r.tool_executions[0]))


def _drop_output(r: ConversationRecord) -> None:
    r.history = [i for i in r.history if i.type != "function_call_output"]


def _drop_call(r: ConversationRecord) -> None:
    r.history = [i for i in r.history if i.type != "function_call"]


def _drop_on_exit(r: ConversationRecord) -> None:
    r.hook_calls = [h for h in r.hook_calls if h.hook != "on_exit"]


def _unanswered_call_in_request(r: ConversationRecord) -> None:
    request = copy.copy(r.llm_requests[0])
    request.chat_ctx = request.chat_ctx.copy()
    request.chat_ctx.items.append(FunctionCall(call_id="c9_9", name="lookup"))
    r.llm_requests[0] = request


def _swap_assistant_messages(r: ConversationRecord) -> None:
    idx = [n for n, i in enumerate(r.history) if isinstance(i, ChatMessage)
           and i.role == "assistant"]
    r.history[idx[0]], r.history[idx[-1]] = r.history[idx[-1]], r.history[idx[0]]


def _second_generation(r: ConversationRecord) -> None:
    user = next(req for req in r.llm_requests if req.trigger == "user")
    twin = copy.copy(user)
    twin.number = len(r.llm_requests) + 1
    r.llm_requests.append(twin)
    r.history.append(ChatMessage(role="assistant", content=[f"r{twin.number} again"]))


def _late_close(r: ConversationRecord) -> None:
    r.exited_at = r.close_requested_at + 100.0


def _event_after_close(r: ConversationRecord) -> None:
    r.events.append(("error", None, r.exited_at))


def _leftover(r: ConversationRecord) -> None:
    r.leftover_tasks.append("a forgotten task")


def _escaped(r: ConversationRecord) -> None:
    r.escaped = ExceptionGroup("boom", [RuntimeError("from a model")])


def _no_answer(r: ConversationRecord) -> None:
    r.history = [i for i in r.history if not (isinstance(i, ChatMessage)
                                              and i.role == "assistant" and "r4" in
                                              (i.text_content or ""))]


def _overlap(r: ConversationRecord) -> None:
    r.output_overlaps.append((r.t0 + 5.0, r.t0 + 4.0))


def _stuck_speech(r: ConversationRecord) -> None:
    first = r.speech_handles[0].id
    r.speech_done_at[first] = r.close_requested_at


@pytest.mark.parametrize(("invariant", "plant", "expected"), [
    (inv.tool_calls_executed_at_most_once, _duplicate_execution, "executed 2 times"),
    (inv.tool_calls_answered_once, _drop_output, "has 0 outputs"),
    (inv.executed_calls_recorded, _drop_call, "its result was lost"),
    (inv.hooks_paired, _drop_on_exit, "has no on_exit"),
    (inv.llm_never_sees_unanswered_calls, _unanswered_call_in_request, "['c9_9']"),
    (inv.assistant_messages_in_order, _swap_assistant_messages, "out of creation order"),
    (inv.one_generation_per_input, _second_generation, "answered by 2 generations"),
    (inv.close_within_grace, _late_close, "closing took 100.00 s"),
    (inv.close_is_last_event, _event_after_close, "events after close"),
    (inv.nothing_left_running, _leftover, "a forgotten task"),
    (inv.no_exception_escapes, _escaped, "RuntimeError: from a model"),
    (inv.every_quiet_input_answered, _no_answer, "'thanks (1)'"),
    (inv.one_speech_at_a_time, _overlap, "a second speech sent audio"),
    (inv.conversation_settles, _stuck_speech, "was still not done"),
])
def test_every_invariant_finds_its_defect(clean: ConversationRecord, invariant, plant,
                                          expected: str) -> None:
    assert violations(clean, [invariant]) == []
    found = violations(_planted(clean, plant), [invariant])
    assert len(found) >= 1 and expected in found[0], found
    assert found[0].startswith(f"{invariant.__name__}: ")


def test_default_invariants_are_the_documented_set() -> None:
    names = {i.__name__ for i in DEFAULT_INVARIANTS}
    assert names == {"no_exception_escapes", "close_is_last_event", "close_within_grace",
                     "nothing_left_running", "hooks_paired", "tool_calls_executed_at_most_once",
                     "tool_calls_answered_once", "executed_calls_recorded",
                     "llm_never_sees_unanswered_calls", "assistant_messages_in_order",
                     "one_generation_per_input", "every_quiet_input_answered",
                     "one_speech_at_a_time", "conversation_settles"}


# -- planted mistakes in agents, caught end to end ------------------------------------------------

class AnswersTwice(Helper):
    """A plausible mistake: replying from the turn hook as well (the runtime replies too)."""

    async def on_user_turn_completed(self, turn_ctx, new_message) -> None:
        self.session.generate_reply(user_input=new_message.text_content)


class NeverAnswers(Helper):
    async def on_user_turn_completed(self, turn_ctx, new_message) -> None:
        raise StopResponse()


def test_an_agent_that_answers_a_turn_twice_is_caught() -> None:
    with pytest.raises(ConversationViolation) as caught:
        check_conversation(AnswersTwice, SCHEDULE, invariants=INVARIANTS)
    assert any(v.startswith("one_generation_per_input: the input \"what's the weather (0)\"")
               and "committed 2 times" in v for v in caught.value.violations), \
        caught.value.violations


def test_an_agent_that_never_answers_is_caught_unless_that_invariant_is_left_out() -> None:
    with pytest.raises(ConversationViolation) as caught:
        check_conversation(NeverAnswers, SCHEDULE, invariants=INVARIANTS)
    assert [v.split(":")[0] for v in caught.value.violations] == [
        "every_quiet_input_answered"]
    assert "--- schedule ---" in str(caught.value) and "--- timeline" in str(caught.value)
    check_conversation(NeverAnswers, SCHEDULE, invariants=[
        i for i in INVARIANTS if i is not inv.every_quiet_input_answered])


def test_extra_invariants_see_the_record_and_report_by_name() -> None:
    seen: list[int] = []

    def counts_tools(record: ConversationRecord) -> None:
        seen.append(len(record.tool_executions))

    def wants_no_tools(record: ConversationRecord) -> list[str]:
        return [f"{e.name} ran" for e in record.tool_executions]

    def asserts(record: ConversationRecord) -> None:
        assert not record.tool_executions, "no tools, please"

    with pytest.raises(ConversationViolation) as caught:
        check_conversation(Helper, SCHEDULE, invariants=(),
                           extra_invariants=[counts_tools, wants_no_tools, asserts])
    assert seen == [1]
    found = caught.value.violations
    assert len(found) == 2 and found[0] == "wants_no_tools: lookup ran"
    assert found[1].startswith("asserts: no tools, please")


def test_tool_behaviour_is_injected_around_the_users_tool() -> None:
    ran: list[str] = []

    class Recording(Helper):
        @function_tool
        async def lookup(self, ctx: RunContext, topic: str) -> str:
            """Look something up.

            Args:
                topic: What
            """
            ran.append(topic)
            return "sunny"

    def call(outcome: str) -> Schedule:
        return Schedule(actions=(TextInput(at=1.0, text="go (0)", reply=Reply(calls=(ToolCall(
            name="lookup", arguments='{"topic": "x"}', latency=2.0, outcome=outcome),))),),
            close_at=8.0)

    results = {}
    for outcome in ("ok", "raise_before", "raise_after", "tool_error", "hang"):
        ran.clear()
        record = check_conversation(Recording, call(outcome), invariants=INVARIANTS)
        (execution,) = record.tool_executions
        results[outcome] = (ran[:], execution.result, record.t(execution.ended_at))
    # the call comes at the end of the LLM stream (1.3), the latency is 2 s, close at 8
    assert results == {"ok": (["x"], "returned", 3.3),
                       "raise_before": ([], "raised RuntimeError", 3.3),
                       "raise_after": (["x"], "raised RuntimeError", 3.3),
                       "tool_error": ([], "raised ToolError", 3.3),
                       "hang": ([], "cancelled", 8.0)}


def test_a_shielded_tool_delays_the_close_within_the_bound() -> None:
    record = check_conversation(Helper, Schedule(actions=(TextInput(
        at=1.0, text="go (0)", reply=Reply(calls=(ToolCall(
            name="lookup", arguments='{"topic": "x"}', shield=3.0),))),), close_at=1.4),
        invariants=INVARIANTS)
    # the call comes at the end of the LLM stream (1.3); its shielded 3 s run to their end
    assert record.t(record.exited_at) == pytest.approx(4.3)


# -- schedules are checked when they are made -----------------------------------------------------

@pytest.mark.parametrize(("kwargs", "message"), [
    ({"actions": (TextInput(at=2.0, text="a"), TextInput(at=1.0, text="b"))}, "time order"),
    ({"actions": (TextInput(at=5.0, text="a"),), "close_at": 4.0}, "before the last action"),
    ({"actions": (UserSpeech(at=1.0, duration=0.0),)}, "more than 0 s"),
    ({"close_at": -1.0}, "not negative"),
])
def test_bad_schedules_are_refused_at_once(kwargs, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Schedule(**kwargs)


def test_conversations_needs_some_kind_of_action() -> None:
    with pytest.raises(ValueError, match="at least one kind"):
        find(conversations(speech=False, text=False, interruptions=False), lambda s: True)


@settings(QUICK, max_examples=50)
@given(conversations(tools={"lookup": {"topic": "x"}}, runs=True))
def test_drawn_schedules_are_valid_and_distinct_in_words(schedule: Schedule) -> None:
    words = [a.transcript if isinstance(a, UserSpeech) else a.text for a in schedule.inputs()]
    assert len(words) == len(set(words))
    assert [a.at for a in schedule.actions] == sorted(a.at for a in schedule.actions)
    assert schedule.close_at >= schedule.actions[-1].at


# -- the README example ---------------------------------------------------------------------------

def _books_at_most_one_table(agent_class):
    def holds(schedule: Schedule) -> bool:
        restaurant = Restaurant()
        try:
            check_conversation(lambda: agent_class(restaurant), schedule, invariants=INVARIANTS,
                               extra_invariants=[at_most_one_table(restaurant)])
        except ConversationViolation:
            return False
        return True

    return holds


def test_hypothesis_finds_and_shrinks_the_planted_booking_race() -> None:
    holds = _books_at_most_one_table(RacyBookingAgent)
    minimal = find(conversations(tools={"book_table": {"time": "7pm"}}, faults=False),
                   lambda s: not holds(s), settings=settings(QUICK, max_examples=300))
    calls = [c for a in minimal.inputs() for c in a.reply.calls]
    assert len(calls) == 2 and {c.name for c in calls} == {"book_table"}
    assert len(minimal.actions) <= 2


@settings(QUICK, max_examples=150)
@given(conversations(tools={"book_table": {"time": "7pm"}}, faults=False))
def test_the_fixed_booking_agent_books_one_table(schedule: Schedule) -> None:
    assert _books_at_most_one_table(BookingAgent)(schedule)


# -- hypothesis is needed only for the strategies -------------------------------------------------

def test_the_testing_package_imports_and_runs_without_hypothesis() -> None:
    code = textwrap.dedent("""
        import sys
        class NoHypothesis:
            def find_spec(self, name, path=None, target=None):
                if name == "hypothesis" or name.startswith("hypothesis."):
                    raise ImportError("hypothesis is not installed")
        sys.meta_path.insert(0, NoHypothesis())
        from agents_trio import Agent
        from agents_trio.testing import Schedule, TextInput, check_conversation
        record = check_conversation(lambda: Agent(instructions="hi"), Schedule(
            actions=(TextInput(at=1.0, text="hello"),), close_at=5.0))
        assert record.llm_requests, record.timeline()
        assert "hypothesis" not in sys.modules
        try:
            import agents_trio.testing.strategies
        except ImportError as e:
            print("strategies need hypothesis:", e)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=pathlib.Path(__file__).parents[1], timeout=120)
    assert result.returncode == 0, result.stderr
    assert "strategies need hypothesis" in result.stdout


async def test_run_conversation_works_inside_a_trio_test(autojump_clock) -> None:
    from agents_trio.testing import run_conversation

    record = await run_conversation(Helper, SCHEDULE)
    assert violations(record, INVARIANTS) == []
    assert trio.current_time() >= record.t0 + SCHEDULE.close_at
