"""``llm.AsyncToolset``: given to the session, its calls survive handoffs and report to the
agent current then (LiveKit's session-scoped executor); its ``tool_handling`` wins over the
agent's and the session's."""

from __future__ import annotations

import pytest
import trio

from agents_trio import (Agent, AgentSession, FunctionCallOutput, FunctionToolCall, RunContext,
                         ToolFlag, function_tool)
from agents_trio.llm import AsyncToolset
from agents_trio.testing import FakeActions, FakeLLM
from agents_trio.tool_handling import REPLY_AT_TAIL, UPDATE_TEMPLATE

FINISHED: list[str] = []


@function_tool(flags=ToolFlag.CANCELLABLE)
async def book(ctx: RunContext) -> str:
    """Book."""
    await ctx.update("booking")
    await trio.sleep(10)
    FINISHED.append(type(ctx.session.current_agent).__name__)  # type: ignore[attr-defined]
    return "booked"


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="billing")


class Front(Agent):
    def __init__(self, *, own_tools: list[object] | None = None) -> None:
        super().__init__(instructions="front", tools=own_tools)

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer to billing."""
        return Billing()


def _call(name: str, call_id: str) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments="{}", call_id=call_id)


def _said(session: AgentSession) -> list[str]:
    return [m.text_content or "" for m in session.history.items
            if getattr(m, "role", None) == "assistant"]


def _script(update_text: str) -> FakeActions:
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("book", "b1")], input="go")
    a.add_llm("on it", input=update_text)
    a.add_llm("", tool_calls=[_call("transfer", "t1")], input="billing please")
    return a


async def test_a_session_toolsets_call_survives_a_handoff_and_reports_to_the_new_agent(
        autojump_clock) -> None:
    FINISHED.clear()
    a = _script(UPDATE_TEMPLATE.format(function_name="book", call_id="b1", message="booking"))
    a.add_llm("billing here: your booking is done",
              input=REPLY_AT_TAIL.format(call_ids=["b1_final"]))
    ended: list[tuple[str, str]] = []
    async with AgentSession(llm=FakeLLM(a.llm_responses),
                            tools=[AsyncToolset(id="booking", tools=[book])]) as session:
        session.on("tool_execution_updated", lambda ev: ended.append(
            (ev.update.call_id, ev.update.status))
            if ev.update.type == "tool_call_ended" else None)
        await session.start(Front())
        with trio.fail_after(60):
            await session.run(user_input="go")
            await session.run(user_input="billing please")
            # the handoff did not wait for the booking (nor cancel it, cancellable as it is)
            assert isinstance(session.current_agent, Billing)
            assert trio.current_time() < 10
            await trio.sleep(15)
            await session.wait_for_idle()
        outputs = {i.call_id: i.output for i in session.history.items
                   if isinstance(i, FunctionCallOutput)}
    assert FINISHED == ["Billing"]
    assert outputs["b1_final"] == "booked"
    assert ("b1", "done") in ended
    assert _said(session)[-1] == "billing here: your booking is done"


async def test_an_agents_own_cancellable_call_is_cancelled_by_the_handoff(autojump_clock):
    FINISHED.clear()
    a = _script(UPDATE_TEMPLATE.format(function_name="book", call_id="b1", message="booking"))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Front(own_tools=[AsyncToolset(id="booking", tools=[book])]))
        with trio.fail_after(60):
            await session.run(user_input="go")
            await session.run(user_input="billing please")
            await trio.sleep(15)
    assert FINISHED == []


async def test_the_toolsets_templates_win(autojump_clock) -> None:
    a = _script("TOOLSET booking")
    async with AgentSession(
            llm=FakeLLM(a.llm_responses),
            tool_handling={"async_options": {"update_template": "SESSION {message}"}},
            tools=[AsyncToolset(id="booking", tools=[book], tool_handling={
                "async_options": {"update_template": "TOOLSET {message}"}})]) as session:
        await session.start(Front())
        with trio.fail_after(60):
            await session.run(user_input="go")
        assert _said(session) == ["on it"]


def test_the_removed_keyword_is_refused() -> None:
    with pytest.raises(TypeError, match="on_duplicate"):
        AsyncToolset(id="x", on_duplicate_call="reject")
    with pytest.raises(ValueError, match="unknown key"):
        AsyncToolset(id="x", tool_handling={"x": 1})  # type: ignore[typeddict-unknown-key]
