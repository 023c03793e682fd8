"""``llm.Toolset`` and ``ProviderTool`` in ``Agent(tools=...)``: flattened for the LLM as
LiveKit's ``ToolContext.flatten()`` does, their tools callable, their lifetime the agent's."""

from __future__ import annotations

import pytest
import trio

from agents_trio import Agent, AgentSession, ChatContext, FunctionToolCall, ModelSettings, \
    function_tool
from agents_trio.llm import ProviderTool, Toolset
from agents_trio.testing import FakeActions, FakeLLM


@function_tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Clock(Toolset):
    def __init__(self) -> None:
        super().__init__(id="clock", tools=[Toolset(id="inner", tools=[add])])
        self.events: list[str] = []

    async def setup(self) -> Toolset:
        self.events.append("setup")
        return await super().setup()

    async def aclose(self) -> None:
        self.events.append("aclose")
        await super().aclose()

    @function_tool
    async def now(self) -> str:
        """The time."""
        return "noon"


class WebSearch(ProviderTool):
    def __init__(self) -> None:
        super().__init__(id="web_search")


class Recording(Agent):
    def __init__(self, tools: list) -> None:
        super().__init__(instructions="x", tools=tools)
        self.seen: list[list[str]] = []

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings):
        self.seen.append([getattr(t, "name", None) or t.id for t in tools])
        async for chunk in super().llm_node(chat_ctx, tools, model_settings):
            yield chunk


async def test_toolsets_are_flattened_for_the_llm_and_their_tools_run(autojump_clock):
    clock, search = Clock(), WebSearch()
    agent = Recording([clock, search])
    assert agent.tools[:2] == [clock, search]  # the structure is kept
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="add", arguments='{"a": 2, "b": 3}',
                                               call_id="c1"),
                              FunctionToolCall(name="now", arguments="{}", call_id="c2")],
              input="go")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(10):
            result = await session.run(user_input="go")
        assert clock.events == ["setup"]
    assert clock.events == ["setup", "aclose"]
    assert agent.seen[0] == ["add", "now", "web_search"]
    outputs = {e.item.call_id: e.item.output for e in result.events
               if e.type == "function_call_output"}
    assert outputs == {"c1": "5", "c2": "noon"}


def test_two_tools_with_one_name_are_refused_at_construction() -> None:
    @function_tool(name="add")
    async def other_add(a: int) -> int:
        """Another add."""
        return a

    with pytest.raises(ValueError, match="duplicate function name: add"):
        Agent(instructions="x", tools=[Toolset(id="t", tools=[add]), other_add])
    Agent(instructions="x", tools=[Toolset(id="t", tools=[add]), add])  # the same tool: fine


def test_a_plain_function_is_refused() -> None:
    async def not_a_tool() -> None:
        pass

    with pytest.raises(ValueError, match="@function_tool"):
        Agent(instructions="x", tools=[not_a_tool])


async def test_a_session_toolset_is_set_up_per_agent_and_closed_with_the_session(
        autojump_clock):
    clock = Clock()
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="now", arguments="{}", call_id="c1")],
              input="time?")
    async with AgentSession(llm=FakeLLM(a.llm_responses), tools=[clock]) as session:
        await session.start(Agent(instructions="x"))
        with trio.fail_after(10):
            result = await session.run(user_input="time?")
        assert [e.item.output for e in result.events
                if e.type == "function_call_output"] == ["noon"]
        assert clock.events == ["setup"]  # an agent's end does not close the session's
    assert clock.events == ["setup", "aclose"]


def test_flattening_leaves_no_cyclic_garbage() -> None:
    # once per LLM step: a reference cycle left behind each time (a recursive closure is one)
    # would be work for the cyclic collector, whose young collections then come sooner
    import gc

    from agents_trio.async_toolset import async_toolsets_by_tool
    from agents_trio.toolsets import flatten_tools

    tools = [Clock(), WebSearch(), add]
    # settled first: collecting what earlier tests left can run finalizers that leave more
    while gc.collect():
        pass
    gc.disable()
    try:
        for _ in range(3):
            assert [getattr(t, "name", None) or t.id for t in flatten_tools(tools)] == [
                "add", "now", "web_search"]
            async_toolsets_by_tool(tools)
        assert gc.collect() == 0
    finally:
        gc.enable()
