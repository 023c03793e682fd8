"""TaskGroup's ``out_of_scope`` tool (going back to an earlier step) is offered to the user's
turns of a later step, not to the reply that step's ``on_enter`` generates (LiveKit flags it
``IGNORE_ON_ENTER``): found comparing LiveKit's survey example on both runtimes."""

from __future__ import annotations

import trio
import trio.testing

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, TaskGroup,
                         function_tool)
from agents_trio.testing import FakeLLM
from agents_trio.testing.actions import FakeLLMResponse


class _Step(AgentTask[str]):
    def __init__(self, topic: str) -> None:
        super().__init__(instructions=f"Ask about {topic}.")
        self.topic = topic

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions=f"Ask about the {self.topic}.")

    @function_tool
    async def record(self, answer: str) -> None:
        """Record the answer.

        Args:
            answer: The answer
        """
        self.complete(answer)


class _Survey(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Run the survey.")

    async def on_enter(self) -> None:
        group = TaskGroup(summarize_chat_ctx=False)
        group.add(lambda: _Step("name"), id="name", description="the name")
        group.add(lambda: _Step("city"), id="city", description="the city")
        await group


def _tool_names(call: dict[str, object]) -> set[str]:
    return {t.name for t in call["tools"]}  # type: ignore[attr-defined]


async def test_out_of_scope_is_hidden_from_the_on_enter_reply_of_a_later_step(
        autojump_clock: trio.testing.MockClock) -> None:
    llm = FakeLLM([
        FakeLLMResponse(input="Sam", content="", ttft=0.1, duration=0.1, tool_calls=[
            FunctionToolCall(name="record", arguments='{"answer": "Sam"}', call_id="c1")]),
    ])
    async with AgentSession(llm=llm) as session:
        await session.start(_Survey())
        with trio.fail_after(30):
            await session.run(user_input="Sam")
            await session.run(user_input="Paris, but my name is Samuel")
    offered = [_tool_names(call) for call in llm.calls]
    # name's on_enter, name's answer, city's on_enter, city's user turn
    assert len(offered) == 4, offered
    assert "out_of_scope" not in offered[0] | offered[1]
    assert "out_of_scope" not in offered[2]
    assert "out_of_scope" in offered[3]


class _Name(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask the name.")

    @function_tool
    async def record_name(self, name: str) -> None:
        """Record the name.

        Args:
            name: The name
        """
        self.complete(name)


class _City(_Step):
    def __init__(self) -> None:
        super().__init__("city")


class _NameThenCity(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Run the survey.")

    async def on_enter(self) -> None:
        group = TaskGroup(summarize_chat_ctx=False)
        group.add(_Name, id="name", description="the name")
        group.add(_City, id="city", description="the city")
        await group


async def test_a_later_step_does_not_see_calls_of_tools_it_does_not_have(
        autojump_clock: trio.testing.MockClock) -> None:
    # as update_chat_ctx does (LiveKit's exclude_invalid_function_calls): the city step
    # gets the conversation so far, without the name step's record_name call and output
    llm = FakeLLM([
        FakeLLMResponse(input="Sam", content="", ttft=0.1, duration=0.1, tool_calls=[
            FunctionToolCall(name="record_name", arguments='{"name": "Sam"}', call_id="c1")]),
    ])
    async with AgentSession(llm=llm) as session:
        await session.start(_NameThenCity())
        with trio.fail_after(30):
            await session.run(user_input="Sam")
    city_enter = llm.calls[-1]["chat_ctx"].items  # type: ignore[attr-defined]
    kinds = [item.type for item in city_enter]
    texts = [item.text_content for item in city_enter if item.type == "message"]
    assert "Sam" in texts  # the conversation is carried over
    assert "function_call" not in kinds and "function_call_output" not in kinds, kinds
