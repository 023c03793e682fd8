"""``tool_handling={"async_options": ...}``: the templates written around background tools, set
on the session, an agent (which wins as a whole, completed with the defaults) or a toolset."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agents_trio import (Agent, AgentSession, FunctionCallOutput, FunctionToolCall, RunContext,
                         function_tool)
from agents_trio.testing import FakeActions, FakeLLM
from agents_trio.tool_handling import REPLY_AT_TAIL, UPDATE_TEMPLATE


class Searcher(Agent):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(instructions="search", **kwargs)

    @function_tool(on_duplicate="reject")
    async def search(self, ctx: RunContext, query: str) -> str:
        """Search.

        Args:
            query: What to look for.
        """
        await ctx.update("looking")
        await trio.sleep(10)
        return "found 3"


def _call(call_id: str) -> FunctionToolCall:
    return FunctionToolCall(name="search", arguments='{"query": "x"}', call_id=call_id)


def _outputs(session: AgentSession) -> dict[str, str]:
    return {i.call_id: i.output for i in session.history.items
            if isinstance(i, FunctionCallOutput)}


async def _converse(agent: Agent, actions: FakeActions, **session_kwargs: Any
                    ) -> tuple[AgentSession, FakeLLM]:
    llm = FakeLLM(actions.llm_responses)
    async with AgentSession(llm=llm, **session_kwargs) as session:
        await session.start(agent)
        with trio.fail_after(100):
            await session.run(user_input="go")
            await trio.sleep(20)
            await session.wait_for_idle()
    return session, llm


def _instructions_seen(llm: FakeLLM) -> list[str]:
    return [str(call["chat_ctx"].items[-1].text_content) for call in llm.calls]


async def test_session_templates_wrap_updates_and_instruct_the_deferred_reply(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("s1")], input="go")
    a.add_llm("on it", input="UPD search/s1: looking")
    a.add_llm("three", input="RESULTS s1_final")
    options = {"async_options": {
        "update_template": "UPD {function_name}/{call_id}: {message}",
        "reply_at_tail_template": lambda args: "RESULTS " + ",".join(args["call_ids"])}}
    session, llm = await _converse(Searcher(), a, tool_handling=options)
    assert _outputs(session) == {"s1": "UPD search/s1: looking", "s1_final": "found 3"}
    assert [m.text_content for m in session.history.items
            if getattr(m, "role", None) == "assistant"] == ["on it", "three"]


async def test_an_agents_options_win_as_a_whole_over_the_sessions(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("s1")], input="go")
    default_update = UPDATE_TEMPLATE.format(function_name="search", call_id="s1",
                                            message="looking")
    a.add_llm("on it", input=default_update)
    a.add_llm("three", input="AGENT RESULTS ['s1_final']")
    session, _ = await _converse(
        Searcher(tool_handling={"async_options": {
            "reply_at_tail_template": "AGENT RESULTS {call_ids}"}}), a,
        tool_handling={"async_options": {"update_template": "SESSION {message}",
                                         "reply_at_tail_template": "SESSION {call_ids}"}})
    # the agent set no update template: the default, not the session's
    assert _outputs(session)["s1"] == default_update
    assert [m.text_content for m in session.history.items
            if getattr(m, "role", None) == "assistant"] == ["on it", "three"]


async def test_a_duplicate_is_refused_with_the_configured_template(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("s1")], input="go")
    a.add_llm("on it", input="UPD looking")
    a.add_llm("", tool_calls=[_call("s2")], input="again")
    a.add_llm("still busy", input="BUSY search 1")
    a.add_llm("three", input=REPLY_AT_TAIL.format(call_ids=["s1_final"]))
    options = {"async_options": {
        "update_template": "UPD {message}",
        "duplicate_reject_template": lambda args: (
            f"BUSY {args['function_name']} {len(args['fnc_calls_json'])}")}}
    async with AgentSession(llm=FakeLLM(a.llm_responses), tool_handling=options) as session:
        await session.start(Searcher())
        with trio.fail_after(100):
            await session.run(user_input="go")
            await session.run(user_input="again")
            await trio.sleep(20)
            await session.wait_for_idle()
    assert _outputs(session)["s2"] == "BUSY search 1"
    assert [m.text_content for m in session.history.items
            if getattr(m, "role", None) == "assistant"] == ["on it", "still busy", "three"]


@pytest.mark.parametrize(("value", "error", "match"), [
    ("x", TypeError, "takes a dict"),
    ({"sync_options": {}}, ValueError, "unknown key"),
    ({"async_options": {"update": "x"}}, ValueError, "unknown async_options key"),
    ({"async_options": {"update_template": 3}}, TypeError, "update_template"),
])
def test_bad_tool_handling_fails_at_construction(value: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        AgentSession(tool_handling=value)
    with pytest.raises(error, match=match):
        Agent(instructions="x", tool_handling=value)
