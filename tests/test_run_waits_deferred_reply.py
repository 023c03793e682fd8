"""``session.run()`` and background tools, as LiveKit's run: a report that asks for a reply
while the run is active keeps the run open until that deferred reply is done, even when the
reply is not scheduled yet (it waits for the agent to be idle)."""

from __future__ import annotations

import trio

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext,
                         function_tool)
from agents_trio.testing import FakeActions, FakeLLM
from agents_trio.tool_handling import REPLY_AT_TAIL, REPLY_MAYBE_COVERED, UPDATE_TEMPLATE


class Searcher(Agent):
    def __init__(self, *, work: float) -> None:
        super().__init__(instructions="search")
        self.work = work

    @function_tool
    async def search(self, ctx: RunContext) -> str:
        """Search."""
        await ctx.update("looking")
        await trio.sleep(self.work)
        return "found 3"


def _script(reply_after_results: str) -> FakeActions:
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="search", arguments="{}", call_id="s1")],
              input="go")
    # the reply to the first update is slow: the result arrives while it is generated
    a.add_llm("on it", input=UPDATE_TEMPLATE.format(function_name="search", call_id="s1",
                                                    message="looking"), duration=5)
    a.add_llm("three results", input=reply_after_results)
    return a


async def test_the_run_ends_after_the_deferred_reply_asked_for_during_it(autojump_clock):
    a = _script(REPLY_AT_TAIL.format(call_ids=["s1_final"]))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Searcher(work=1))
        with trio.fail_after(60):
            result = await session.run(user_input="go")
        said = [e.item.text_content for e in result.events if e.type == "message"]
        assert said == ["on it", "three results"]


async def test_a_result_after_the_run_ended_does_not_reopen_it(autojump_clock):
    a = _script(REPLY_AT_TAIL.format(call_ids=["s1_final"]))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Searcher(work=30))
        with trio.fail_after(60):
            result = await session.run(user_input="go")
            said = [e.item.text_content for e in result.events if e.type == "message"]
            assert said == ["on it"]
            await trio.sleep(40)
            await session.wait_for_idle()
        assert session.history.items[-1].text_content == "three results"


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


class Parent(Searcher):
    @function_tool
    async def ask(self, ctx: RunContext) -> str:
        """Ask the user for a value."""
        return f"got {await AskValue()}"


async def test_a_reply_of_an_agent_paused_for_a_task_does_not_hold_the_run(autojump_clock):
    """As LiveKit: the paused agent's reply cannot come before the task returns, and the task
    needs the next run to return, so the run in progress does not wait for it."""
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="search", arguments="{}", call_id="s1")],
              input="go")
    a.add_llm("on it", input=UPDATE_TEMPLATE.format(function_name="search", call_id="s1",
                                                    message="looking"))
    a.add_llm("", tool_calls=[FunctionToolCall(name="ask", arguments="{}", call_id="a1")],
              input="value please")
    # slow: the search result arrives while the task's question is generated
    a.add_llm("what value?", input="ask for a value", duration=10)
    a.add_llm("", tool_calls=[FunctionToolCall(name="finish", arguments='{"value": "42"}',
                                               call_id="f1")], input="42")
    a.add_llm("thanks", input="got 42")
    for template in (REPLY_AT_TAIL, REPLY_MAYBE_COVERED):
        a.add_llm("three results", input=template.format(call_ids=["s1_final"]))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Parent(work=3))
        with trio.fail_after(60):
            await session.run(user_input="go")
            result = await session.run(user_input="value please")
        said = [e.item.text_content for e in result.events if e.type == "message"]
        assert said == ["what value?"]
        assert isinstance(session.current_agent, AskValue)
        # the task returns: the parent resumes, answers its tool, then gives the search result
        with trio.fail_after(60):
            result = await session.run(user_input="42")
        said = [e.item.text_content for e in result.events if e.type == "message"]
        assert said == ["thanks", "three results"]
