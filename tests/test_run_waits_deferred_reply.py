"""``session.run()`` and background tools, as LiveKit's run: a report that asks for a reply
while the run is active keeps the run open until that deferred reply is done, even when the
reply is not scheduled yet (it waits for the agent to be idle)."""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession, FunctionToolCall, RunContext, function_tool
from agents_trio.testing import FakeActions, FakeLLM
from agents_trio.tool_handling import REPLY_AT_TAIL, UPDATE_TEMPLATE


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
