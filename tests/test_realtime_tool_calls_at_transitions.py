"""Realtime function calls at the agent's transitions: a call (or the end of a response carrying
calls) that arrives while the agent resumes after an AgentTask and its realtime session
reconnects, while it drains for a handoff or a close, or as the session closes (virtual
time)."""

from __future__ import annotations

from collections import Counter

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_trio import (Agent, AgentSession, AgentTask, FunctionCallOutput, FunctionToolCall,
                         RunContext, function_tool)
from agents_trio.testing import (FakeAudioInput, FakeAudioOutput, FakeLLM, FakeLLMResponse,
                                 FakeRealtimeModel, FakeTTS, FakeTTSResponse)


def _session(model: FakeRealtimeModel) -> AgentSession:
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    return session


def _outputs_pushed(rt) -> list[str]:
    """The call ids of the function outputs the session ``rt`` was given."""
    return [i.call_id for i in rt.chat_ctx.items if isinstance(i, FunctionCallOutput)]


class Ask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask for a number.")

    async def on_enter(self) -> None:
        self.complete("7")


class AsksOnce(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You help.")
        self.asked = 0

    @function_tool
    async def ask_number(self, ctx: RunContext) -> str:
        """Ask a number."""
        self.asked += 1
        return f"number {await Ask()}"


# -- the parent resumes after its AgentTask: its tool reply waits for the reconnect -----------
async def test_the_tool_reply_after_an_agent_task_waits_for_the_reconnected_session(
        autojump_clock):
    """LiveKit's resume sets the realtime session up (instructions, chat context, tools)
    before its scheduler runs again: the tool reply of the call that awaited the task goes to
    the reconnected session, with the call's output in its context."""
    model = FakeRealtimeModel(update_latency=0.1)
    model.add_response("number", "", function_calls=[FunctionToolCall(
        name="ask_number", arguments="{}", call_id="n1")])
    model.add_response("number 7", "Seven, noted.", audio_duration=0.5)
    session = _session(model)
    async with session:
        agent = AsksOnce()
        await session.start(agent)
        with trio.fail_after(30):
            result = await session.run(user_input="number")
        said = [i.text_content for i in session.history.messages() if i.role == "assistant"]
        assert said == ["Seven, noted."]  # the tool reply was dropped
        assert result.expect.contains_message(role="assistant")
        assert agent.asked == 1
        parent, task, resumed = model.sessions
        assert parent.closed and task.closed and not resumed.closed
        assert _outputs_pushed(resumed) == ["n1"]
        assert "generate_reply" in resumed.call_names()
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [o.call_id for o in outputs] == ["n1"]
    assert model.violations == [] and model.live_sessions == []
    assert model.max_live_sessions == 1


async def test_a_slow_reconnect_after_an_agent_task_still_gets_the_tool_reply(autojump_clock):
    """The resumed parent's session takes a while to connect: the tool reply waits for it."""
    model = FakeRealtimeModel(connect_delays=[0, 0, 1.5])
    model.add_response("number", "", function_calls=[FunctionToolCall(
        name="ask_number", arguments="{}", call_id="n1")])
    model.add_response("number 7", "Seven, noted.", audio_duration=0.5)
    session = _session(model)
    async with session:
        await session.start(AsksOnce())
        with trio.fail_after(30):
            await session.run(user_input="number")
        said = [i.text_content for i in session.history.messages() if i.role == "assistant"]
        assert said == ["Seven, noted."]
        resumed = model.sessions[2]
        assert _outputs_pushed(resumed) == ["n1"]
    assert model.violations == [] and model.live_sessions == []


class AsksThenThinks(AsksOnce):
    @function_tool
    async def ask_number(self, ctx: RunContext) -> str:
        """Ask a number."""
        number = await Ask()
        await trio.sleep(0.5)  # the resumed session is sending the agent's context meanwhile
        return f"number {number}"


async def test_tool_outputs_committed_while_the_session_reconnects_reach_it(autojump_clock):
    """The call's output is committed while the reconnecting session is being sent the
    agent's context (which did not hold it yet): the output still reaches that session, before
    the tool reply is asked for."""
    model = FakeRealtimeModel(update_latency=0.2)
    model.add_response("number", "", function_calls=[FunctionToolCall(
        name="ask_number", arguments="{}", call_id="n1")])
    model.add_response("number 7", "Seven, noted.", audio_duration=0.5)
    session = _session(model)
    async with session:
        await session.start(AsksThenThinks())
        with trio.fail_after(30):
            await session.run(user_input="number")
        resumed = model.sessions[2]
        said = [i.text_content for i in session.history.messages() if i.role == "assistant"]
        assert said == ["Seven, noted."]
        asked = [i for i, (n, _) in enumerate(resumed.calls) if n == "generate_reply"]
        with_output = [i for i, (n, a) in enumerate(resumed.calls) if n == "update_chat_ctx"
                       and any(isinstance(x, FunctionCallOutput) for x in a.items)]
        assert with_output and asked and with_output[0] < asked[0]
    assert model.violations == [] and model.live_sessions == []


# -- a server-initiated response while the agent drains ---------------------------------------
class SlowExit(Agent):
    """Its on_exit takes a while: the agent drains (its new turns are blocked) meanwhile."""

    def __init__(self) -> None:
        super().__init__(instructions="You help.")
        self.ran: list[str] = []
        self.exiting = trio.Event()

    async def on_exit(self) -> None:
        self.exiting.set()
        await trio.sleep(1.0)

    @function_tool
    async def get_weather(self, ctx: RunContext) -> str:
        """Weather."""
        self.ran.append(ctx.function_call.call_id)
        return "sunny"


async def test_a_server_response_while_the_agent_drains_runs_no_tool(autojump_clock):
    """LiveKit skips a server-initiated generation once the agent's new turns are blocked
    ("the speech scheduling is not running"): its function calls are not executed by an agent
    that is leaving."""
    model = FakeRealtimeModel()
    session = _session(model)
    executed: list[object] = []
    session.on("function_tools_executed", executed.append)
    async with session:
        agent = SlowExit()
        await session.start(agent)
        rt = model.sessions[0]
        session.shutdown(drain=True)
        with trio.fail_after(10):
            await agent.exiting.wait()
        rt.emit_generation("Checking.", audio_duration=0.3, function_calls=[FunctionToolCall(
            name="get_weather", arguments="{}", call_id="w1")])
        await trio.sleep(5)  # the drain, on_exit and the close
        assert session.closing
    assert agent.ran == []
    assert executed == []
    assert [i for i in session.history.items if i.type.startswith("function_call")] == []
    assert model.violations == [] and model.live_sessions == []


# -- Hypothesis: calls arriving at every transition ----------------------------------------------
class _Book:
    """What the tools did and what the session reported, for the invariants below."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str]] = []  # (call_id, agent id)
        self.ended: set[str] = set()
        self.executed_events: list[list[str]] = []  # the call ids of each event
        # the calls of server responses emitted once the agent took no new turn (draining,
        # handing over, paused): LiveKit skips those responses, so none of them may run
        self.refused: set[str] = set()


class _Task(AgentTask[str]):
    def __init__(self, book: _Book, delay: float) -> None:
        super().__init__(instructions="Ask for a number.", id="ask")
        self.delay = delay

    async def on_enter(self) -> None:
        await trio.sleep(self.delay)
        if not self.done():  # a handoff meanwhile fails it for its awaiter
            self.complete("7")


class _Front(Agent):
    def __init__(self, book: _Book, delay: float) -> None:
        super().__init__(instructions="front desk", id="front")
        self.book, self.delay = book, delay

    async def on_exit(self) -> None:
        await trio.sleep(self.delay)  # draining: its new turns are blocked meanwhile

    async def _track(self, ctx: RunContext, seconds: float) -> None:
        self.book.started.append((ctx.function_call.call_id, self.id))
        try:
            await trio.sleep(seconds)
        finally:
            self.book.ended.add(ctx.function_call.call_id)

    @function_tool
    async def get_weather(self, ctx: RunContext) -> str:
        """Weather."""
        await self._track(ctx, self.delay)
        return "sunny"

    @function_tool
    async def ask_number(self, ctx: RunContext) -> str:
        """Ask a number."""
        await self._track(ctx, 0)
        return f"number {await _Task(self.book, self.delay)}"

    @function_tool
    async def transfer(self, ctx: RunContext) -> Agent:
        """To sales."""
        await self._track(ctx, 0)
        return _Sales(self.book, self.delay)


class _Sales(Agent):
    def __init__(self, book: _Book, delay: float) -> None:
        super().__init__(instructions="sales", id="sales")
        self.book, self.delay = book, delay

    @function_tool
    async def back(self, ctx: RunContext) -> Agent:
        """Back to the front desk."""
        self.book.started.append((ctx.function_call.call_id, self.id))
        self.book.ended.add(ctx.function_call.call_id)
        return _Front(self.book, self.delay)


_CALLS = {"weather": ["get_weather"], "number": ["ask_number"], "transfer": ["transfer"],
          "back": ["back"], "weather and number": ["get_weather", "ask_number"],
          "weather and transfer": ["get_weather", "transfer"]}


def _rt_model() -> FakeRealtimeModel:
    model = FakeRealtimeModel(response_stall_timeout=2.0, update_latency=0.05,
                              connect_delays=[0.0, 0.3, 0.0, 0.6, 0.1, 0.0, 0.4])
    for key, names in _CALLS.items():
        model.add_response(key, "On it.", audio_duration=0.3, function_calls=[
            FunctionToolCall(name=n, arguments="{}", call_id="") for n in names])
    model.add_response("sunny", "It is sunny.", audio_duration=0.4)
    model.add_response("number 7", "Seven, noted.", audio_duration=0.4)
    return model


_OPS = ["user_calls", "user_calls", "server_calls", "server_calls", "update_agent", "reconnect",
        "barge_in", "drain_close"]


@st.composite
def _scripts(draw):
    ops = draw(st.lists(st.tuples(
        st.sampled_from(_OPS), st.sampled_from(sorted(_CALLS)),
        st.floats(0.0, 1.0).map(lambda x: round(x, 2))), min_size=1, max_size=7))
    return ops, round(draw(st.floats(0.0, 1.5)), 2), round(draw(st.floats(0.0, 3.0)), 2)


async def _drive_calls(ops, delay: float, close_after: float, model: FakeRealtimeModel,
                       book: _Book, out: dict[str, object]) -> None:
    session = _session(model)
    session.on("function_tools_executed", lambda ev: book.executed_events.append(
        [c.call_id for c in ev.function_calls]))
    closed = False
    try:
        with trio.fail_after(300):
            async with session:
                await session.start(_Front(book, delay))
                for j, (op, key, wait) in enumerate(ops):
                    await trio.sleep(wait)
                    # a connected session (it got the agent's state): a server emits nothing
                    # before it is connected
                    live = [s for s in model.live_sessions if s.calls]
                    try:
                        if op == "user_calls":
                            session.generate_reply(user_input=key)
                        elif op == "server_calls" and live:
                            calls = [FunctionToolCall(name=n, arguments="{}",
                                                      call_id=f"s{j}_{i}")
                                     for i, n in enumerate(_CALLS[key])]
                            activity = session.activity  # the session's, if it is its own
                            if (activity is not None and activity.realtime is not None
                                    and activity.realtime.session is live[-1]
                                    and not activity.takes_new_turns):
                                book.refused.update(c.call_id for c in calls)
                            live[-1].emit_generation("Hm.", audio_duration=0.2,
                                                     function_calls=calls)
                        elif op == "update_agent":
                            session.update_agent(_Sales(book, delay) if isinstance(
                                session.current_agent, _Front) else _Front(book, delay))
                        elif op == "reconnect" and live:
                            live[-1].emit_reconnected()
                        elif op == "barge_in" and live:
                            live[-1].emit_speech_started()
                        elif op == "drain_close":
                            session.shutdown(drain=True)
                    except RuntimeError:
                        pass  # the agent drains or the session closes: nothing to schedule
                await trio.sleep(close_after)
                out["close_at"] = trio.current_time()
                closed = True
            out["closed_at"] = trio.current_time()
    except trio.TooSlowError:
        out["timed_out"] = closed
    except Exception as e:  # noqa: BLE001 - the invariant reports it
        out["escaped"] = e
    out["history"] = list(session.history.items)


@settings(max_examples=80, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(_scripts())
def test_realtime_calls_at_transitions_run_once_and_are_answered_once(script):
    """Each call a realtime response carries, whatever the agent is doing as it arrives
    (resuming after an AgentTask while its session reconnects, handed over, draining, the
    session reconnecting or closing): executed at most once, reported by at most one
    ``function_tools_executed`` (exactly one once it ran), answered exactly once in the
    history, never by a closed session; the close ends within its grace with no tool running
    and nothing escaping."""
    ops, delay, close_after = script
    model, book, out = _rt_model(), _Book(), {}
    trio.run(_drive_calls, ops, delay, close_after, model, book, out,
             clock=trio.testing.MockClock(autojump_threshold=0))
    assert "escaped" not in out, out.get("escaped")
    assert "timed_out" not in out
    history = out["history"]
    started = [c for c, _ in book.started]
    assert len(started) == len(set(started)), "a call ran twice"
    assert not book.refused & set(started), "a call of a response the agent refused ran"
    assert set(started) <= book.ended, "a tool still runs after the close"
    reported = [c for ev in book.executed_events for c in ev]
    assert len(reported) == len(set(reported)), "a call reported by two events"
    assert set(started) <= set(reported), "a call ran and was never reported"
    calls = Counter(i.call_id for i in history if i.type == "function_call")
    answers = Counter(i.call_id for i in history if i.type == "function_call_output")
    assert all(n == 1 for n in calls.values()), calls
    assert answers == calls, (calls, answers)
    assert set(started) <= set(calls), "a call ran and its result was lost"
    assert out["closed_at"] - out["close_at"] <= 3 * 5.0  # close_grace per level, two levels
    assert model.violations == []
    assert model.live_sessions == []
    assert model.max_live_sessions <= 1


# -- leaving the session while a drain waits for queued replies -------------------------------
class Weather(Agent):
    def __init__(self, exit_after: float | None) -> None:
        super().__init__(instructions="You help.")
        self.exit_after = exit_after

    async def on_exit(self) -> None:
        if self.exit_after is not None:
            await trio.sleep(self.exit_after)

    @function_tool
    async def get_weather(self, ctx: RunContext) -> str:
        """Weather."""
        return "sunny"


@pytest.mark.parametrize("exit_delay", ["none", "slow"])
@pytest.mark.parametrize("model_kind", ["realtime", "pipeline"])
async def test_a_close_during_a_drain_with_queued_replies_ends_within_its_grace(
        autojump_clock, model_kind, exit_delay):
    """``shutdown(drain=True)`` (a tool's, say) while a reply plays and two more are queued,
    then the session is left: the close cancels the replies, and the drain, which waited for
    them to play, ends with the agent (it waited its whole 6 x close_grace for queued replies
    the close had ended, which never play)."""
    if model_kind == "realtime":
        model = FakeRealtimeModel()
        model.add_response("weather", "On it.", audio_duration=3.0, function_calls=[
            FunctionToolCall(name="get_weather", arguments="{}", call_id="")])
        session = _session(model)
    else:
        session = AgentSession(llm=FakeLLM([FakeLLMResponse(input="weather", content="On it.")]),
                               tts=FakeTTS([FakeTTSResponse(input="On it.", audio_duration=3.0)]))
        session.output.audio = FakeAudioOutput()
    async with session:
        await session.start(Weather(None if exit_delay == "none" else 0.5))
        for _ in range(3):
            session.generate_reply(user_input="weather")
        await trio.sleep(0.5)  # the first reply plays, two are queued behind it
        session.shutdown(drain=True)
        await trio.sleep(1.0)  # the drain waits for them
        assert session.activity is not None and session.activity.speech_scheduled
        left_at = trio.current_time()
    assert trio.current_time() - left_at <= 2 * session.close_grace
    calls = Counter(i.call_id for i in session.history.items if i.type == "function_call")
    answers = Counter(i.call_id for i in session.history.items
                      if i.type == "function_call_output")
    assert answers == calls
