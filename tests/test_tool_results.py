"""What a tool's result asks for: ``FunctionCallOutput.reply_required`` and its effect on the
tool reply (LiveKit's semantics: the step replies when any of its outputs requires it)."""

from __future__ import annotations

import trio

from agents_trio import (Agent, AgentSession, FunctionToolCall, FunctionToolsExecutedEvent,
                         RunContext, function_tool)
from agents_trio.llm import ToolResult
from agents_trio.testing import FakeActions, FakeLLM


class Keypad(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You press keys.")

    @function_tool
    async def send_dtmf(self, ctx: RunContext, digits: str) -> ToolResult:
        """Send digits.

        Args:
            digits: The digits
        """
        return ToolResult(f"sent {digits}", reply_required=False)

    @function_tool
    async def lookup(self, what: str) -> str:
        """Look something up.

        Args:
            what: The thing
        """
        return f"found {what}"


def _call(name: str, arguments: str, call_id: str) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=arguments, call_id=call_id)


async def _run(actions: FakeActions, text: str, on_tools=None):
    session = AgentSession(llm=FakeLLM(actions.llm_responses))
    async with session:
        await session.start(Keypad())
        if on_tools is not None:
            session.on("function_tools_executed", on_tools)
        with trio.fail_after(10):
            result = await session.run(user_input=text)
        return session, result


def _assistant_texts(result) -> list[str]:
    return [e.item.text_content for e in result.events
            if e.type == "message" and e.item.role == "assistant"]


async def test_an_output_not_requiring_a_reply_gets_none(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("send_dtmf", '{"digits": "12"}', "c1")], input="press 12")
    a.add_llm("I pressed the keys.", input="sent 12")
    _, result = await _run(a, "press 12")
    outputs = [e.item for e in result.events if e.type == "function_call_output"]
    assert [(o.output, o.reply_required) for o in outputs] == [("sent 12", False)]
    assert _assistant_texts(result) == []


async def test_one_output_requiring_a_reply_is_enough(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("send_dtmf", '{"digits": "3"}', "c1"),
                              _call("lookup", '{"what": "hours"}', "c2")], input="press 3")
    a.add_llm("Pressed, and the hours are known.", input="found hours")
    _, result = await _run(a, "press 3")
    assert _assistant_texts(result) == ["Pressed, and the hours are known."]


async def test_cancel_tool_reply_clears_every_outputs_reply_required(autojump_clock):
    seen: list[FunctionToolsExecutedEvent] = []

    def on_tools(ev: FunctionToolsExecutedEvent) -> None:
        assert ev.has_tool_reply
        ev.cancel_tool_reply()
        seen.append(ev)

    a = FakeActions()
    a.add_llm("", tool_calls=[_call("lookup", '{"what": "hours"}', "c1")], input="hours?")
    a.add_llm("The hours are known.", input="found hours")
    _, result = await _run(a, "hours?", on_tools)
    assert len(seen) == 1
    assert [o.reply_required for o in seen[0].function_call_outputs] == [False]
    assert seen[0].has_tool_reply is False
    assert _assistant_texts(result) == []
