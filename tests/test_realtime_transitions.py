"""The realtime link at its transitions: a handoff, a pause or an agent update arriving while
the realtime session connects, reconnects or answers (virtual time)."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import (Agent, AgentSession, AgentTask, ChatContext, ChatMessage,
                         FunctionToolCall, RealtimeCapabilities, RunContext, function_tool)
from agents_trio.testing import FakeAudioInput, FakeAudioOutput, FakeRealtimeModel


def _session(model: FakeRealtimeModel) -> AgentSession:
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    return session


class Helper(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You help.")


@function_tool
async def lookup(ctx: RunContext, city: str) -> str:
    """Look a city up.

    Args:
        city: The city
    """
    return city


# -- agent updates reach the live session ----------------------------------------------------
async def test_agent_updates_reach_the_live_session_once(autojump_clock):
    """LiveKit's activity sends each update to its realtime session."""
    model = FakeRealtimeModel()
    session = _session(model)
    async with session:
        agent = Helper()
        await session.start(agent)
        rt = model.sessions[0]
        await agent.update_instructions("Be brief.")
        await agent.update_tools([lookup])
        await agent.update_chat_ctx(ChatContext([ChatMessage(role="user", content=["earlier"])]))
        await trio.sleep(1)
        assert rt.instructions == "Be brief."
        assert rt.tools == ["lookup"]
        assert [i.text_content for i in rt.chat_ctx.items] == ["earlier"]
        assert [a for n, a in rt.calls if n == "update_instructions"] == ["You help.",
                                                                           "Be brief."]
        assert [a for n, a in rt.calls if n == "update_tools"] == [[], ["lookup"]]
    assert model.violations == []


async def test_an_update_during_the_connection_is_applied_once_it_is_live(autojump_clock):
    """The session gets the agent's state while it connects (each update takes a while): an
    update made meanwhile reaches it once, after what the connection sent."""
    model = FakeRealtimeModel(update_latency=0.5)
    session = _session(model)
    async with session:
        agent = Helper()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.start, agent)
            await trio.sleep(0.7)  # the connection sends the instructions, then the tools
            await agent.update_instructions("Be brief.")
        await trio.sleep(2)
        rt = model.sessions[0]
        assert rt.instructions == "Be brief."
        assert [a for n, a in rt.calls if n == "update_instructions"] == ["You help.",
                                                                           "Be brief."]
    assert model.violations == []


async def test_an_update_during_a_reconnect_is_applied_once(autojump_clock):
    model = FakeRealtimeModel(update_latency=0.5)
    session = _session(model)
    async with session:
        agent = Helper()
        await session.start(agent)
        rt = model.sessions[0]
        rt.emit_reconnected()
        await trio.sleep(0.2)  # the resync sends the instructions
        await agent.update_instructions("Be brief.")
        await trio.sleep(3)
        assert rt.instructions == "Be brief."
        sent = [a for n, a in rt.calls if n == "update_instructions"]
        assert sent[-1] == "Be brief." and sent.count("Be brief.") == 1
    assert model.violations == []


async def test_a_reply_asked_for_right_after_an_update_follows_it(autojump_clock):
    model = FakeRealtimeModel(update_latency=0.5)
    session = _session(model)
    async with session:
        agent = Helper()
        await session.start(agent)
        rt = model.sessions[0]
        await agent.update_instructions("Be brief.")
        with trio.fail_after(10):
            await session.generate_reply(instructions="hello")
        names = rt.call_names()
        assert names.index("generate_reply") > \
            max(i for i, (n, a) in enumerate(rt.calls) if a == "Be brief.")
    assert model.violations == []


# -- the activity ending or pausing while its session (re)connects ----------------------------
class Ask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask for a number.")

    async def on_enter(self) -> None:
        self.complete("7")


class Sales(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You sell.")


class AsksThenTransfers(Helper):
    @function_tool
    async def transfer(self, ctx: RunContext) -> Agent:
        """Ask a number, then transfer to sales."""
        await Ask()
        return Sales()


class AsksTwice(Helper):
    @function_tool
    async def ask_two(self, ctx: RunContext) -> str:
        """Ask two numbers."""
        return f"{await Ask()} and {await Ask()}"


async def test_a_handoff_while_the_resumed_agent_reconnects_does_not_wait_for_it(
        autojump_clock):
    """The parent resumes after its AgentTask and reconnects; its tool hands off meanwhile.
    The reconnect is abandoned: the handoff does not wait for a server that never answers."""
    model = FakeRealtimeModel(connect_delays=[0, 0, math.inf])
    model.add_response("sales please", "", function_calls=[FunctionToolCall(
        name="transfer", arguments="{}", call_id="t1")])
    session = _session(model)
    async with session:
        await session.start(AsksThenTransfers())
        with trio.fail_after(10):
            await session.run(user_input="sales please")
            while not isinstance(session.current_agent, Sales) or len(model.sessions) < 4:
                await trio.sleep(0.1)
        parent, task, reconnect, sales = model.sessions
        assert reconnect.closed and not sales.closed
        assert sales.instructions == "You sell."
    assert model.max_live_sessions == 1
    assert model.violations == [] and model.live_sessions == []


async def test_a_pause_while_the_resumed_agent_reconnects_does_not_wait_for_it(autojump_clock):
    model = FakeRealtimeModel(connect_delays=[0, 0, math.inf])
    model.add_response("two numbers", "", function_calls=[FunctionToolCall(
        name="ask_two", arguments="{}", call_id="a1")])
    model.add_response("7 and 7", "Seven and seven.", audio_duration=0.5)
    session = _session(model)
    async with session:
        await session.start(AsksTwice())
        with trio.fail_after(10):
            result = await session.run(user_input="two numbers")
        assert result.expect[-1].is_message().event().item.text_content == "Seven and seven."
        assert model.sessions[2].closed  # the abandoned reconnect
        assert model.max_live_sessions == 1
    assert model.violations == [] and model.live_sessions == []


# -- replies asked for while the session hands off or closes ---------------------------------
@pytest.mark.parametrize("moment", [0.0, 0.05, 0.3])
@pytest.mark.parametrize("ending", ["handoff", "close"])
@pytest.mark.parametrize("kind", ["generate_reply", "say"])
async def test_a_reply_asked_for_as_the_agent_ends_ends_its_handle(autojump_clock, moment,
                                                                   ending, kind):
    model = FakeRealtimeModel(update_latency=0.1, capabilities=RealtimeCapabilities(
        turn_detection=True, audio_output=True, supports_say=True, mutable_chat_context=True,
        message_truncation=True))
    model.add_response("hello", "Hello there.", audio_duration=1.0, ttft=0.2)
    session = _session(model)
    async with session:
        await session.start(Helper())
        first = model.sessions[0]
        handle = (session.generate_reply(instructions="hello") if kind == "generate_reply"
                  else session.say("Hello there.", allow_interruptions=True))
        await trio.sleep(moment)
        if ending == "handoff":
            session.update_agent(Sales())
        else:
            await session.aclose()
        with trio.fail_after(10):
            await handle
            while ending == "handoff" and len(model.sessions) < 2:
                await trio.sleep(0.1)  # the next agent connects once the old session closed
        assert first.closed
    assert model.violations == [] and model.live_sessions == []
    assert model.max_live_sessions == 1


# -- barge-in at the moment a response is created ---------------------------------------------
@settings(max_examples=40, deadline=None, database=None)
@given(barge_at=st.floats(0.0, 0.4).map(lambda x: round(x, 2)), rnd=st.random_module())
def test_a_barge_in_as_the_response_is_created_ends_the_reply_once(barge_at, rnd):
    model = FakeRealtimeModel()
    model.add_response("hello", "Hello there, how are you?", audio_duration=1.0, ttft=0.2)
    done: list[bool] = []

    async def main() -> None:
        session = _session(model)
        async with session:
            await session.start(Helper())
            rt = model.sessions[0]
            handle = session.generate_reply(instructions="hello")
            await trio.sleep(barge_at)
            rt.emit_speech_started()
            with trio.fail_after(10):
                await handle
            done.append(handle.interrupted)
            await trio.sleep(2)
            assert rt.call_names().count("interrupt") <= 1
            played = [i for i in session.history.messages() if i.role == "assistant"]
            assert all(m.interrupted for m in played)
            assert session.agent_state != "speaking"

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert done == [True]
    assert model.violations == [] and model.live_sessions == []


# -- interrupting while a tool call's reply is generated --------------------------------------
class Weather(Helper):
    @function_tool
    async def get_weather(self, ctx: RunContext, city: str) -> str:
        """Get the weather.

        Args:
            city: The city
        """
        await trio.sleep(0.2)
        return f"sunny in {city}"


@pytest.mark.parametrize("moment", [0.25, 0.35, 0.45, 0.6])
async def test_an_interrupt_during_the_tool_reply_answers_the_call_once(autojump_clock,
                                                                         moment):
    model = FakeRealtimeModel(update_latency=0.05)
    model.add_response("weather?", "", function_calls=[FunctionToolCall(
        name="get_weather", arguments='{"city": "Oslo"}', call_id="w1")], ttft=0.1)
    model.add_response("sunny in Oslo", "It is sunny in Oslo.", audio_duration=1.0, ttft=0.2)
    model.add_response("again", "Anything else?", audio_duration=0.5)
    session = _session(model)
    async with session:
        await session.start(Weather())
        handle = session.generate_reply(user_input="weather?")
        await trio.sleep(moment)
        handle.interrupt()
        with trio.fail_after(10):
            await handle
        with trio.fail_after(10):
            await session.generate_reply(instructions="again")
        outputs = [i for i in session.history.items if i.type == "function_call_output"]
        assert [o.call_id for o in outputs] == ["w1"]
        assert session.history.messages()[-1].text_content == "Anything else?"
    assert model.violations == [] and model.live_sessions == []
