"""``lk_agents_cancel_task`` / ``lk_agents_get_running_tasks``: offered to the model, as in
LiveKit, when any of the agent's tools is ``CANCELLABLE``; the model lists the running
cancellable calls and cancels one by its call_id."""

from __future__ import annotations

import json
from typing import Any

import trio

from agents_trio import (Agent, AgentSession, FunctionCallOutput, FunctionToolCall, RunContext,
                         ToolFlag, function_tool)
from agents_trio.testing import FakeActions, FakeLLM
from agents_trio.tool_handling import UPDATE_TEMPLATE


class Booker(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="book")
        self.booked = False

    @function_tool(flags=ToolFlag.CANCELLABLE)
    async def book(self, ctx: RunContext) -> str:
        """Book."""
        await ctx.update("booking")
        await trio.sleep(30)
        self.booked = True
        return "booked"

    @function_tool
    async def pay(self, ctx: RunContext) -> str:
        """Pay."""
        await ctx.update("paying")
        await trio.sleep(30)
        return "paid"


class Plain(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="plain")

    @function_tool
    async def pay(self) -> str:
        """Pay."""
        return "paid"


def _call(name: str, id_: str, **args: Any) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=json.dumps(args), call_id=id_)


def _updated(name: str, call_id: str, message: str) -> str:
    return UPDATE_TEMPLATE.format(function_name=name, call_id=call_id, message=message)


def _outputs(session: AgentSession) -> dict[str, FunctionCallOutput]:
    return {i.call_id: i for i in session.history.items if isinstance(i, FunctionCallOutput)}


async def test_the_model_lists_and_cancels_a_running_call(autojump_clock) -> None:
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("book", "b1"), _call("pay", "p1")], input="go")
    a.add_llm("on it", input=_updated("pay", "p1", "paying"))
    a.add_llm("", tool_calls=[_call("lk_agents_get_running_tasks", "g1")], input="what runs?")
    a.add_llm("", tool_calls=[_call("lk_agents_cancel_task", "c1", call_id="b1")],
              input="cancel it")
    a.add_llm("cancelled", input="Task b1 cancelled successfully.")
    a.add_llm("", tool_calls=[_call("lk_agents_cancel_task", "c2", call_id="b1"),
                              _call("lk_agents_cancel_task", "c3", call_id="p1")],
              input="again")
    llm = FakeLLM(a.llm_responses)
    agent = Booker()
    ended: list[tuple[str, str]] = []
    async with AgentSession(llm=llm) as session:
        session.on("tool_execution_updated", lambda ev: ended.append(
            (ev.update.call_id, ev.update.status)) if ev.update.type == "tool_call_ended"
            else None)
        await session.start(agent)
        with trio.fail_after(100):
            await session.run(user_input="go")
            await session.run(user_input="what runs?")
            await session.run(user_input="cancel it")
            await session.run(user_input="again")
            await trio.sleep(40)
            await session.wait_for_idle()
        outputs = _outputs(session)
    assert {t.name for t in llm.calls[0]["tools"]} == {
        "book", "pay", "lk_agents_cancel_task", "lk_agents_get_running_tasks"}
    listed = outputs["g1"].output
    assert "'call_id': 'b1'" in listed and "'name': 'book'" in listed
    assert "p1" not in listed  # pay is not cancellable: not listed
    assert outputs["c1"].output == "Task b1 cancelled successfully." and not outputs["c1"].is_error
    assert outputs["c2"].is_error and "Task b1 not found" in outputs["c2"].output
    assert outputs["c3"].is_error and "Tool call p1 is not cancellable" in outputs["c3"].output
    assert not agent.booked
    assert ("b1", "cancelled") in ended and ("p1", "done") in ended
    assert "b1_final" not in outputs and "p1_final" in outputs


async def test_no_cancellable_tool_no_extra_tools(autojump_clock) -> None:
    a = FakeActions()
    a.add_llm("hi", input="go")
    llm = FakeLLM(a.llm_responses)
    async with AgentSession(llm=llm) as session:
        await session.start(Plain())
        await session.run(user_input="go")
    assert [t.name for t in llm.calls[0]["tools"]] == ["pay"]
