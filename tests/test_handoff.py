"""Handoffs: update_agent and tools returning an Agent (reference 7.1-7.4)."""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession, FunctionToolCall, RunContext, function_tool
from agents_trio.testing import FakeActions, FakeLLM


class Billing(Agent):
    def __init__(self, log: list[str]) -> None:
        super().__init__(instructions="You handle billing.")
        self.log = log

    async def on_enter(self) -> None:
        self.log.append("billing.on_enter")
        self.session.generate_reply(instructions="greet for billing")


class Front(Agent):
    def __init__(self, log: list[str], *, with_message: bool = True) -> None:
        super().__init__(instructions="You are the front desk.")
        self.log = log
        self.with_message = with_message

    async def on_enter(self) -> None:
        self.log.append("front.on_enter")

    async def on_exit(self) -> None:
        self.log.append("front.on_exit")

    @function_tool
    async def transfer(self, ctx: RunContext):
        """Transfer to billing."""
        if self.with_message:
            return Billing(self.log), "transferring"
        return Billing(self.log)


def _session(**kw) -> AgentSession:
    a = FakeActions()
    a.add_llm("ok moving", tool_calls=[FunctionToolCall(name="transfer", arguments="{}",
                                                        call_id="t1")], input="go")
    a.add_llm("one moment please", input="transferring")
    a.add_llm("hello from billing", input="greet for billing")
    return AgentSession(llm=FakeLLM(a.llm_responses), **kw)


async def test_tool_returning_an_agent_and_a_message_speaks_then_hands_off(autojump_clock):
    log: list[str] = []
    session = _session()
    items: list[str] = []
    session.on("conversation_item_added", lambda ev: items.append(
        ev.item.type if ev.item.type == "agent_handoff" else ev.item.text_content))
    async with session:
        await session.start(Front(log))
        with trio.fail_after(10):
            result = await session.run(user_input="go")
        result.expect.next_event().is_message(role="assistant")
        result.expect.next_event().is_function_call(name="transfer")
        result.expect.next_event().is_function_call_output()
        assert result.expect.next_event().is_message().event().item.text_content == \
            "one moment please"
        handoff = result.expect.next_event().is_agent_handoff(new_agent_type=Billing).event()
        assert isinstance(handoff.old_agent, Front)
        assert result.expect.next_event().is_message().event().item.text_content == \
            "hello from billing"
        result.expect.no_more_events()
        assert isinstance(session.current_agent, Billing)
    assert log == ["front.on_enter", "front.on_exit", "billing.on_enter"]
    assert items == ["agent_handoff", "go", "ok moving", "one moment please", "agent_handoff",
                     "hello from billing"]
    llm = session.llm
    # the old agent's tool reply could not call tools any more
    assert [c["tool_choice"] for c in llm.calls] == [None, "none", None]
    # the new agent's context has only its own items
    billing = session.current_agent
    assert [i.type for i in billing.chat_ctx.items] == ["message", "agent_config_update",
                                                        "message"]


async def test_tool_returning_only_an_agent_keeps_the_run_until_the_new_agent_speaks(
        autojump_clock):
    log: list[str] = []
    session = _session()
    async with session:
        await session.start(Front(log, with_message=False))
        with trio.fail_after(10):
            result = await session.run(user_input="go")
        result.expect.skip_next(3)
        result.expect.next_event().is_agent_handoff(new_agent_type=Billing)
        result.expect.next_event().is_message(role="assistant")
        result.expect.no_more_events()


async def test_update_agent_switches_immediately_and_serializes(autojump_clock):
    log: list[str] = []
    session = _session()
    async with session:
        await session.start(Front(log))
        first, second = Billing(log), Billing(log)
        session.update_agent(first)
        session.update_agent(second)
        assert session.current_agent is second
        with trio.fail_after(10):
            while not (session._activity and session._activity.agent is second):
                await trio.sleep(0.1)
    handoffs = [(h.old_agent_id, h.new_agent_id) for h in session.history.items
                if h.type == "agent_handoff"]
    assert handoffs == [(None, "front"), ("front", "billing"), ("billing", "billing")]
    assert log == ["front.on_enter", "front.on_exit", "billing.on_enter", "billing.on_enter"]


async def test_interrupted_handoff_is_not_applied_and_answered_as_an_error(autojump_clock):
    a = FakeActions()
    a.add_llm("ok moving", tool_calls=[FunctionToolCall(name="slow_transfer", arguments="{}",
                                                        call_id="t1")], input="go")
    log: list[str] = []

    class SlowFront(Front):
        @function_tool
        async def slow_transfer(self, ctx: RunContext):
            """Transfer slowly."""
            await trio.sleep(2)
            return Billing(self.log)

    session = AgentSession(llm=FakeLLM(a.llm_responses))
    executed = []
    session.on("function_tools_executed", executed.append)
    async with session:
        await session.start(SlowFront(log))
        handle = session.generate_reply(user_input="go")
        await trio.sleep(1.0)
        session.interrupt()
        with trio.fail_after(10):
            await handle
        assert isinstance(session.current_agent, SlowFront)
    (ev,) = executed
    out = ev.function_call_outputs[0]
    assert out.is_error and out.output == "the agent handoff was interrupted and did not happen"
    assert not ev.has_agent_handoff and not ev.has_tool_reply
    assert "billing.on_enter" not in log
