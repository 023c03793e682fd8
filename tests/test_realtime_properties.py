"""Hypothesis over realtime interleavings: server events, tool calls, barge-ins, handoffs,
AgentTasks, responses whose streams never end and reconnects, then close. After each run: no
call reached a closed session, never more than one live session (each activity has at most
one, and a paused or replaced activity's session is closed before the next one opens), and
close leaves no session open; plus the invariants of ``agents_trio.testing`` that apply to a
session driven by hand (recorded with ``watch_session``): each call id answered exactly once in
the history, ``close`` the last event, nothing escaping ``async with`` and nothing left
running."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_trio.testing import (ConversationRecord, Schedule, live_tasks, violations,
                                 watch_session)
from agents_trio.testing.invariants import (close_is_last_event, no_exception_escapes,
                                            nothing_left_running, tool_calls_answered_once,
                                            tool_calls_executed_at_most_once)

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext,
                         function_tool)
from agents_trio.testing import FakeAudioInput, FakeAudioOutput, FakeRealtimeModel


def _call(name: str, arguments: str = "{}") -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=arguments, call_id="")  # unique ids per call


class Ask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask for a number.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask for a number")

    @function_tool
    async def got(self, ctx: RunContext, number: str) -> None:
        """Record it.

        Args:
            number: The number
        """
        self.complete(number)


class Front(Agent):
    def __init__(self, tool_delay: float) -> None:
        super().__init__(instructions="front desk", id="front")
        self.tool_delay = tool_delay

    @function_tool
    async def get_weather(self, ctx: RunContext) -> str:
        """Weather."""
        await trio.sleep(self.tool_delay)
        return "sunny"

    @function_tool
    async def transfer(self, ctx: RunContext):
        """To sales."""
        return Sales(self.tool_delay)

    @function_tool
    async def ask_number(self, ctx: RunContext) -> str:
        """Ask a number."""
        return f"number {await Ask()}"


class Sales(Agent):
    def __init__(self, tool_delay: float) -> None:
        super().__init__(instructions="sales", id="sales")
        self.tool_delay = tool_delay

    @function_tool
    async def back(self, ctx: RunContext):
        """Back to the front desk."""
        return Front(self.tool_delay)


def _model() -> FakeRealtimeModel:
    m = FakeRealtimeModel(response_stall_timeout=2.0)  # stalled replies fail within scripts
    m.add_response("weather", "Checking.", audio_duration=0.4, function_calls=[
        _call("get_weather")])
    m.add_response("sunny", "It is sunny.", audio_duration=0.6)
    m.add_response("transfer", "Transferring.", audio_duration=0.3,
                   function_calls=[_call("transfer")])
    m.add_response("back", "", function_calls=[_call("back")])
    m.add_response("number", "", function_calls=[_call("ask_number")])
    m.add_response("ask for a number", "Which number?", audio_duration=0.4)
    m.add_response("seven", "", function_calls=[_call("got", '{"number": "7"}')])
    m.add_response("number 7", "Seven, noted.", audio_duration=0.4)
    return m


OPS = ["weather", "transfer", "back", "number", "seven", "barge_in", "server_reply",
       "stalled_reply", "reconnect", "update_agent", "error"]


@st.composite
def scripts(draw):
    ops = draw(st.lists(st.tuples(st.sampled_from(OPS),
                                  st.floats(0.0, 1.5).map(lambda x: round(x, 2))),
                        min_size=1, max_size=8))
    return ops, draw(st.floats(0.0, 2.0)), draw(st.floats(0.0, 3.0))


REALTIME_INVARIANTS = (no_exception_escapes, close_is_last_event, nothing_left_running,
                       tool_calls_executed_at_most_once, tool_calls_answered_once)


async def _scenario(ops, tool_delay: float, close_after: float, model: FakeRealtimeModel,
                    errors: list[str], record: ConversationRecord) -> AgentSession:
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    watch_session(session, record)
    before = live_tasks()
    try:
        with trio.fail_after(300):
            await _drive(session, ops, tool_delay, close_after, model, errors)
    except trio.TooSlowError:
        record.timed_out = True
    except Exception as e:
        record.escaped = e
    record.history = list(session.history.items)
    record.leftover_tasks = sorted(t.name for t in live_tasks() - before)
    return session


async def _drive(session: AgentSession, ops, tool_delay: float, close_after: float,
                 model: FakeRealtimeModel, errors: list[str]) -> None:
    async with session:
        await session.start(Front(tool_delay))
        session.input.audio.push(0.1)
        for op, delay in ops:
            await trio.sleep(delay)
            live = model.live_sessions
            try:
                if op in ("weather", "transfer", "back", "number", "seven"):
                    session.generate_reply(user_input=op)
                elif op == "barge_in" and live:
                    live[-1].emit_speech_started()
                elif op == "server_reply" and live:
                    live[-1].emit_generation("Anything else?", audio_duration=0.5)
                elif op == "stalled_reply" and live:  # its streams never end
                    live[-1].emit_generation("Hm.", audio_duration=0.3, stall=True)
                elif op == "reconnect" and live:
                    live[-1].emit_reconnected()
                elif op == "update_agent":
                    agent = session.current_agent
                    session.update_agent(Sales(tool_delay) if isinstance(agent, Front)
                                         else Front(tool_delay))
                elif op == "error" and live:
                    live[-1].emit_error(RuntimeError("glitch"))
            except RuntimeError as e:  # e.g. scheduling on a draining agent
                errors.append(str(e))
        await trio.sleep(close_after)


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_realtime_interleavings_keep_sessions_and_calls_consistent(script):
    ops, tool_delay, close_after = script
    model = _model()
    errors: list[str] = []
    record = ConversationRecord(schedule=Schedule(close_at=sum(d for _, d in ops) + close_after))
    trio.run(_scenario, ops, tool_delay, close_after, model, errors, record,
             clock=trio.testing.MockClock(autojump_threshold=0))
    found = violations(record, REALTIME_INVARIANTS)
    assert not found, "\n".join(found) + "\n" + record.timeline()
    assert model.violations == []
    assert model.live_sessions == []
    assert model.max_live_sessions <= 1
    assert all("cannot schedule" in e or "not running" in e for e in errors), errors
