"""``RunContext.foreground()`` and fillers follow the session's current agent, as LiveKit's
(they wait on ``session.wait_for_idle()``, which re-targets): a background tool of an agent
that is paused for an AgentTask speaks, in the foreground and through its filler, while the
task waits for the user, instead of waiting for the task to return."""

from __future__ import annotations

import trio

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext,
                         function_tool)
from agents_trio.testing import FakeActions, FakeLLM
from agents_trio.tool_handling import UPDATE_TEMPLATE


class AskValue(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask the user for a value.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask for a value")

    @function_tool
    async def finish(self, ctx: RunContext, value: str) -> None:
        """Record the value.

        Args:
            value: The value the user gave
        """
        self.complete(value)


class Parent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="parent")
        self.spoke_in: list[str] = []

    @function_tool
    async def book(self, ctx: RunContext) -> str:
        """Book."""
        await ctx.update("booking")
        async with ctx.with_filler("still booking", delay=1):
            await trio.sleep(5)
        async with ctx.foreground() as activity:
            self.spoke_in.append(type(activity.agent).__name__)
            await ctx.session.say("booked meanwhile")  # type: ignore[attr-defined]
        return "confirmation 42"

    @function_tool
    async def ask(self, ctx: RunContext) -> str:
        """Ask the user for a value."""
        return f"got {await AskValue()}"


def _call(name: str, call_id: str) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments="{}", call_id=call_id)


async def test_foreground_and_filler_speak_through_the_task_the_agent_awaits(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("book", "b1")], input="go")
    a.add_llm("on it", input=UPDATE_TEMPLATE.format(function_name="book", call_id="b1",
                                                    message="booking"))
    a.add_llm("", tool_calls=[_call("ask", "a1")], input="value please")
    a.add_llm("what value?", input="ask for a value")
    parent = Parent()
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(parent)
        with trio.fail_after(60):
            await session.run(user_input="go")
            await session.run(user_input="value please")
            assert isinstance(session.current_agent, AskValue)
            await trio.sleep(15)
        said = [m.text_content for m in session.history.items
                if getattr(m, "role", None) == "assistant"]
        assert said == ["on it", "what value?", "still booking", "booked meanwhile"]
        assert parent.spoke_in == ["AskValue"]
        assert isinstance(session.current_agent, AskValue)
