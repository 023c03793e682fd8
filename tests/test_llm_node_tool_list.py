"""Each LLM step hands ``llm_node`` its own list of tools: an override may add a tool for that
call only (``tools.append(function_tool(...))``, as LiveKit's dynamic-tools example does) and
the tool can be called in that step; the next step (the reply to the tools' output) starts
again from the agent's tools, so the added tool is not there twice."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

import trio
import trio.testing

from agents_trio import (Agent, AgentSession, ChatContext, FunctionTool, FunctionToolCall,
                         ModelSettings, function_tool)
from agents_trio.testing import FakeLLM
from agents_trio.testing.actions import FakeLLMResponse


class _Temporary(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Help.")

    def llm_node(self, chat_ctx: ChatContext, tools: list[FunctionTool],
                 model_settings: ModelSettings) -> AsyncIterable[Any]:
        async def _city_time(city: str) -> str:
            return f"noon in {city}"

        tools.append(function_tool(_city_time, name="city_time",
                                   description="The time in a city"))
        return Agent.default.llm_node(self, chat_ctx, tools, model_settings)


async def test_a_tool_added_in_llm_node_is_callable_and_not_added_twice(
        autojump_clock: trio.testing.MockClock) -> None:
    llm = FakeLLM([
        FakeLLMResponse(input="time in Oslo?", content="", ttft=0.1, duration=0.1,
                        tool_calls=[FunctionToolCall(name="city_time",
                                                     arguments='{"city": "Oslo"}',
                                                     call_id="c1")]),
        FakeLLMResponse(input="noon in Oslo", content="It is noon.", ttft=0.1, duration=0.1),
    ])
    async with AgentSession(llm=llm) as session:
        await session.start(_Temporary())
        with trio.fail_after(30):
            result = await session.run(user_input="time in Oslo?")
    result.expect.next_event().is_function_call(name="city_time")
    result.expect.next_event().is_function_call_output(output="noon in Oslo")
    result.expect.next_event().is_message(role="assistant")
    names = [[t.name for t in call["tools"]] for call in llm.calls]
    assert names == [["city_time"], ["city_time"]]
