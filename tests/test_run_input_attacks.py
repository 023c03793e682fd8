"""Hostile uses of ``session.run()`` against the waiting input (d2e4d66).

A run's input waits until the conversation waits for the user; a handoff asked for before
then gives it to the departing agent, which answers it before the handoff completes, and the
run follows the handoff. Whatever the caller and the agents do around it, these must hold:

- each run's input is committed once and answered by one generation;
- the run returns or raises, and never hangs while the session is open and settles (once
  closed: it raises ``SessionClosedError``, or it had returned);
- no input is sent twice, and a single run never meets "nested runs are not supported".

LiveKit (livekit-agents 1.8.9, ``voice/agent_session.py`` ``run``, lines 855-874) makes the
run the session's run at the call and raises ``RuntimeError("nested runs are not
supported")`` for a second ``run()`` while it is not done.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext,
                         SessionClosedError, TaskGroup, function_tool)
from agents_trio.chat import AgentHandoff, ChatMessage
from agents_trio.run_result import RunResult
from agents_trio.testing import (FakeActions, FakeAudioOutput, FakeLLM, FakeRealtimeModel,
                                 live_tasks)


def _history(session: AgentSession) -> list[str]:
    out = []
    for item in session.history.items:
        if isinstance(item, AgentHandoff):
            out.append(f"handoff {item.old_agent_id} -> {item.new_agent_id}")
        elif isinstance(item, ChatMessage) and item.role in ("user", "assistant"):
            out.append(f"{item.role}: {item.text_content}")
        elif item.type == "function_call":
            out.append(f"call {item.name}")
    return out


def _said(run: RunResult[Any]) -> list[str]:
    return [e.item.text_content for e in run.events if e.type == "message"]


class Greeter(Agent):
    """Greets with a long reply (the conversation is busy for 5 s)."""

    def __init__(self, name: str = "a", *, fail_on_enter: bool = False) -> None:
        super().__init__(instructions=name, id=name)
        self.name = name
        self.fail_on_enter = fail_on_enter

    async def on_enter(self) -> None:
        if self.fail_on_enter:
            raise RuntimeError("on_enter failed")
        self.session.generate_reply(instructions=f"greet {self.name}")


def _script() -> FakeActions:
    a = FakeActions()
    a.add_llm("hello from a", input="greet a", duration=5.0)
    a.add_llm("hello from b", input="greet b", duration=1.0)
    a.add_llm("hello from c", input="greet c", duration=1.0)
    for word in ("one", "two", "three"):
        a.add_llm(f"answer {word}", input=word, duration=1.0)
    return a


def _answered_once(session: AgentSession, word: str) -> None:
    """``word`` was committed once, and answered once, right after."""
    history = _history(session)
    assert history.count(f"user: {word}") == 1, history
    assert history.count(f"assistant: answer {word}") == 1, history
    at = history.index(f"user: {word}")
    assert history[at + 1] == f"assistant: answer {word}", history


async def _outcome(session: AgentSession, word: str, into: dict[str, Any]) -> None:
    try:
        into[word] = await session.run(user_input=word)
    except Exception as e:  # noqa: BLE001 - the outcome is what the test checks
        into[word] = e


# -- two concurrent runs -------------------------------------------------------------------------

def _two_runs_while_busy() -> tuple[dict[str, Any], list[str]]:
    async def main() -> tuple[dict[str, Any], list[str]]:
        outcomes: dict[str, Any] = {}
        async with AgentSession(llm=FakeLLM(_script().llm_responses)) as session:
            await session.start(Greeter())
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_outcome, session, "one", outcomes)
                    await trio.sleep(0.1)  # the greeting still plays: "one" waits
                    nursery.start_soon(_outcome, session, "two", outcomes)
            return outcomes, _history(session)
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=20, deadline=None, database=None, print_blob=False,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.random_module())  # seeds Trio's scheduler (its tie breaks) per example
def test_a_second_run_while_the_first_waits_is_refused_as_in_livekit(_: object) -> None:
    # both waited for the greeting; whichever Trio woke first was sent, so the later call
    # was sometimes answered before the earlier one, which then waited for it. LiveKit's
    # run() is the session's run from the call: a second one is refused at once
    outcomes, history = _two_runs_while_busy()
    first, second = outcomes["one"], outcomes["two"]
    assert isinstance(first, RunResult) and _said(first) == ["answer one"], outcomes
    assert isinstance(second, RuntimeError) and "nested runs" in str(second), outcomes
    assert history == ["handoff None -> a", "assistant: hello from a", "user: one",
                       "assistant: answer one"]


async def test_a_run_after_a_refused_one_and_the_first_returned_is_sent(autojump_clock) -> None:
    outcomes: dict[str, Any] = {}
    async with AgentSession(llm=FakeLLM(_script().llm_responses)) as session:
        await session.start(Greeter())
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_outcome, session, "one", outcomes)
                await trio.sleep(0.1)
                with pytest.raises(RuntimeError, match="nested runs"):
                    await session.run(user_input="two")
            result = await session.run(user_input="three")
        assert _said(outcomes["one"]) == ["answer one"]
        assert _said(result) == ["answer three"]
        _answered_once(session, "one")
        _answered_once(session, "three")
        assert "user: two" not in _history(session)


# -- a handoff asked for from outside while the input waits --------------------------------------

@pytest.mark.parametrize("hops", [1, 2])
async def test_update_agent_from_outside_gives_the_waiting_input_to_the_departing_agent(
        autojump_clock, hops: int) -> None:
    outcomes: dict[str, Any] = {}
    async with AgentSession(llm=FakeLLM(_script().llm_responses)) as session:
        await session.start(Greeter("a"))
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_outcome, session, "one", outcomes)
                await trio.sleep(1.0)  # a's greeting plays; the input waits
                session.update_agent(Greeter("b"))
                if hops == 2:
                    session.update_agent(Greeter("c"))  # nothing left to give
        run = outcomes["one"]
        assert isinstance(run, RunResult), run
        _answered_once(session, "one")
        history = _history(session)
        # a answers it before it leaves, as LiveKit's a would (the input queued on it)
        assert history.index("user: one") < history.index("handoff a -> b")
        last = "c" if hops == 2 else "b"
        assert _said(run)[-1] == f"hello from {last}"  # the run followed the handoffs
        assert session.current_agent.id == last


async def test_a_handoff_whose_new_agent_fails_to_enter_still_ends_the_run(
        autojump_clock) -> None:
    outcomes: dict[str, Any] = {}
    async with AgentSession(llm=FakeLLM(_script().llm_responses)) as session:
        await session.start(Greeter("a"))
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_outcome, session, "one", outcomes)
                await trio.sleep(1.0)
                session.update_agent(Greeter("b", fail_on_enter=True))
        run = outcomes["one"]
        assert isinstance(run, RunResult), run
        assert [e.type for e in run.events] == ["message", "agent_handoff"]
        _answered_once(session, "one")


# -- cancelling the run ----------------------------------------------------------------------------

@pytest.mark.parametrize("cancel_at", [0.5, 1.5, 4.0])
async def test_a_cancelled_run_sends_its_input_once_or_not_at_all(autojump_clock,
                                                                  cancel_at: float) -> None:
    # the handoff at 1.0 takes the input: a run cancelled before sent nothing; after, its
    # input is answered once all the same, and the next run waits its turn
    async with AgentSession(llm=FakeLLM(_script().llm_responses)) as session:
        await session.start(Greeter("a"))
        async with trio.open_nursery() as nursery:
            async def run_until_cancelled() -> None:
                with trio.move_on_after(cancel_at):
                    await session.run(user_input="one")
            nursery.start_soon(run_until_cancelled)
            await trio.sleep(1.0)
            session.update_agent(Greeter("b"))
        with trio.fail_after(60):
            while session.conversation.active_run is not None:
                await trio.sleep(0.5)
            result = await session.run(user_input="two")
        assert _said(result) == ["answer two"]
        history = _history(session)
        if cancel_at < 1.0:
            assert "user: one" not in history, history
        else:
            _answered_once(session, "one")
        _answered_once(session, "two")


# -- the close -------------------------------------------------------------------------------------

@pytest.mark.parametrize("handoff", [False, True])
async def test_a_close_while_the_input_waits_raises_session_closed(autojump_clock,
                                                                   handoff: bool) -> None:
    outcomes: dict[str, Any] = {}
    before = live_tasks()
    async with AgentSession(llm=FakeLLM(_script().llm_responses), close_grace=2.0) as session:
        await session.start(Greeter("a"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_outcome, session, "one", outcomes)
            await trio.sleep(1.0)
            if handoff:
                session.update_agent(Greeter("b"))  # a takes the input, then the close
            started = trio.current_time()
            await session.aclose()
            assert trio.current_time() - started <= 2.0
    assert isinstance(outcomes["one"], SessionClosedError), outcomes
    assert not live_tasks() - before
    assert _history(session).count("user: one") == (1 if handoff else 0)


async def test_a_run_after_the_close_raises_session_closed(autojump_clock) -> None:
    async with AgentSession(llm=FakeLLM(_script().llm_responses)) as session:
        await session.start(Greeter("a"))
        await session.aclose()
        with pytest.raises(SessionClosedError):
            await session.run(user_input="one")


# -- AgentTasks and TaskGroups ---------------------------------------------------------------------

class Ask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="ask", id="ask")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask it")

    @function_tool
    async def finish(self, ctx: RunContext, value: str) -> None:
        """The user said it.

        Args:
            value: What they said
        """
        self.complete(value)


class AsksOnEnter(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="a", id="a")

    async def on_enter(self) -> None:
        got = await Ask()
        self.session.generate_reply(instructions=f"got {got}")


class AsksInTool(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="a", id="a")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet a")

    @function_tool
    async def ask(self, ctx: RunContext) -> str:
        """Ask the user."""
        return f"asked {await Ask()}"


class AsksInGroup(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="a", id="a")

    async def on_enter(self) -> None:
        group = TaskGroup(summarize_chat_ctx=False)
        group.add(Ask, id="first", description="the first question")
        await group
        self.session.generate_reply(instructions="group done")


def _task_script() -> FakeActions:
    a = FakeActions()
    a.add_llm("hello from a", input="greet a", duration=3.0, tool_calls=[
        FunctionToolCall(name="ask", arguments="{}", call_id="c1")])
    a.add_llm("what is it?", input="ask it", duration=3.0)
    a.add_llm("noted", input="one", tool_calls=[
        FunctionToolCall(name="finish", arguments='{"value": "v1"}', call_id="f1")])
    a.add_llm("got it", input="got v1")
    a.add_llm("asked it", input="asked v1")
    a.add_llm("all done", input="group done")
    return a


@pytest.mark.parametrize("agent_type", [AsksOnEnter, AsksInTool, AsksInGroup])
@pytest.mark.parametrize("at", [0.0, 0.5, 4.0])
async def test_a_run_during_an_agent_task_goes_to_the_task_once_it_asks(
        autojump_clock, agent_type: type[Agent], at: float) -> None:
    async with AgentSession(llm=FakeLLM(_task_script().llm_responses)) as session:
        await session.start(agent_type())
        await trio.sleep(at)
        with trio.fail_after(60):
            result = await session.run(user_input="one")
        history = _history(session)
        assert history.count("user: one") == 1, history
        # the task asked, then the input came: it answered it (once) and completed
        assert history.index("assistant: what is it?") < history.index("user: one")
        assert history[history.index("user: one") + 1] == "assistant: noted", history
        assert history.count("call finish") == 1, history
        assert "noted" in _said(result)
        done = {AsksOnEnter: "got it", AsksInTool: "asked it", AsksInGroup: "all done"}
        assert done[agent_type] in _said(result), _said(result)


# -- the departing agent's drain with queued speeches ------------------------------------------

class Chatty(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="a", id="a")

    async def on_enter(self) -> None:
        self.session.say("first")
        self.session.say("second")
        self.session.generate_reply(instructions="greet a")


async def test_the_departing_agent_answers_after_its_queued_speeches(autojump_clock) -> None:
    outcomes: dict[str, Any] = {}
    async with AgentSession(llm=FakeLLM(_script().llm_responses)) as session:
        await session.start(Chatty())
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_outcome, session, "one", outcomes)
                await trio.sleep(0.2)
                session.update_agent(Greeter("b"))
        assert _history(session) == [
            "handoff None -> a", "assistant: first", "assistant: second",
            "assistant: hello from a", "user: one", "assistant: answer one", "handoff a -> b",
            "assistant: hello from b"]
        assert _said(outcomes["one"]) == ["answer one", "hello from b"]


# -- realtime ---------------------------------------------------------------------------------------

class RtDesk(Agent):
    """A realtime agent whose tool hands off after ``latency`` seconds."""

    def __init__(self, latency: float) -> None:
        super().__init__(instructions="desk", id="desk")
        self.latency = latency

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet desk")

    @function_tool
    async def transfer(self, ctx: RunContext) -> Any:
        """Transfer to sales."""
        await trio.sleep(self.latency)
        return RtSales(), "transferring"


class RtSales(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="sales", id="sales")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet sales")


async def _realtime_run(latency: float, greeting_audio: float) -> tuple[RunResult[Any],
                                                                         list[str]]:
    model = FakeRealtimeModel()
    model.add_response("greet desk", "hello from desk", audio_duration=greeting_audio,
                       function_calls=[FunctionToolCall(name="transfer", arguments="{}",
                                                        call_id="t1")])
    model.add_response("greet sales", "hello from sales")
    model.add_response("one", "answer one")
    session = AgentSession(llm=model)
    session.output.audio = FakeAudioOutput()
    async with session:
        await session.start(RtDesk(latency))
        await trio.sleep(0.3)  # the transfer runs: the input waits for it
        with trio.fail_after(60):
            result = await session.run(user_input="one")
        assert model.violations == []
        return result, _history(session)


def _answered_by_sales(result: RunResult[Any], history: list[str]) -> None:
    assert history.count("user: one") == 1, history
    assert history[history.index("user: one") + 1] == "assistant: answer one", history
    assert "answer one" in _said(result), _said(result)
    assert history.index("handoff desk -> sales") < history.index("user: one"), history


async def test_a_realtime_agent_whose_tool_hands_off_leaves_the_input_to_the_next(
        autojump_clock) -> None:
    # the transfer ended (0.6 s) while the desk's greeting still played (3 s): the desk
    # looked settled (a realtime agent's replies hold no input back) and took the input,
    # then its step committed the transfer and handed off, which ended its realtime
    # session: the reply to the input never came (committed, never answered)
    result, history = await _realtime_run(latency=0.5, greeting_audio=3.0)
    _answered_by_sales(result, history)


@settings(max_examples=15, deadline=None, database=None, print_blob=False,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.random_module())  # seeds Trio's scheduler (its tie breaks) per example
def test_a_realtime_handoff_as_its_tool_ends_leaves_the_input_to_the_next(_: object) -> None:
    # the greeting has no audio: between the transfer's end and its step committing it, the
    # waiting run could be woken first (it was, by some interleavings)
    result, history = trio.run(_realtime_run, 2.0, 0.0,
                               clock=trio.testing.MockClock(autojump_threshold=0))
    _answered_by_sales(result, history)
