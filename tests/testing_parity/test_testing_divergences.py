"""Divergences from LiveKit found by porting LiveKit's agent tests, each fixed here (these
tests failed before the fix): ``judge`` was missing from ``ChatMessageAssert``; the LLMs a
LiveKit test opens with ``async with`` (``inference.LLM``, and the ``FakeLLM`` replacing it)
could not be; a tool or mock *returning* an exception was "an invalid output" (LiveKit takes
it as raised); ``NOT_GIVEN`` given to an ``is_*`` criterion was a criterion."""

from __future__ import annotations

import pytest

from agents_trio import (NOT_GIVEN, Agent, AgentSession, FunctionToolCall, RunContext,
                         ToolError, function_tool, inference, mock_tools)
from agents_trio.chat import ChatMessage
from agents_trio.run_result import ChatMessageEvent
from agents_trio.testing import FakeActions, FakeLLM, RunAssert, judge_request_text

from .scripts import turn, verdict


def _message_assert(text: str):
    return RunAssert([ChatMessageEvent(ChatMessage(role="assistant", content=[text]))]
                     ).next_event().is_message(role="assistant")


async def test_judge_passes_on_success_and_returns_itself_for_chaining() -> None:
    msg = _message_assert("Hello!")
    judge = FakeLLM([verdict("Hello!", "greets")])
    assert await msg.judge(judge, intent="greets") is msg


@pytest.mark.parametrize(("text", "intent", "says"), [
    ("", "greets", "The chat message is empty."),
    ("Hello!", "", "Intent is required to judge the message."),
])
async def test_judge_refuses_an_empty_message_or_intent_as_livekit(text, intent, says) -> None:
    msg = (RunAssert([ChatMessageEvent(ChatMessage(role="assistant", content=[text]))])
           .next_event().is_message())
    with pytest.raises(AssertionError, match=says):
        await msg.judge(FakeLLM(), intent=intent)


async def test_judge_fails_when_the_llm_makes_no_tool_call() -> None:
    judge = FakeLLM([turn(judge_request_text("greets", "Hello!"), "I think it does.")])
    with pytest.raises(AssertionError, match="LLM did not return any arguments"):
        await _message_assert("Hello!").judge(judge, intent="greets")


async def test_judge_takes_a_livekit_plugin_llm() -> None:
    pytest.importorskip("livekit.agents")
    from agents_trio.testing.livekit_fakes import FakePluginLLM, tool_call
    judge = FakePluginLLM([tool_call("check_intent", success=False, reason="no greeting")])
    async with AgentSession(llm=FakeLLM()):   # the bridge a plugin runs on
        with pytest.raises(AssertionError, match="Judgement failed: no greeting"):
            await _message_assert("Hello!").judge(judge, intent="greets")
    request = judge.requests[0]
    assert request["chat_ctx"].items[-1].text_content == judge_request_text("greets", "Hello!")
    assert request["tool_choice"] == "required"
    assert [t.info.name for t in request["tools"]] == ["check_intent"]


async def test_judge_refuses_what_is_no_llm() -> None:
    with pytest.raises(TypeError):
        await _message_assert("Hello!").judge(42, intent="greets")


async def test_llms_open_with_async_with_as_in_livekit_tests(monkeypatch) -> None:
    monkeypatch.setenv("LIVEKIT_API_KEY", "key")
    monkeypatch.setenv("LIVEKIT_API_SECRET", "a-secret-of-at-least-thirty-two-bytes")
    async with inference.LLM("openai/gpt-4.1-mini") as gateway:
        assert gateway.model == "openai/gpt-4.1-mini"
    fake = FakeLLM()
    async with fake as opened:
        assert opened is fake


class Shop(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You sell things.")

    @function_tool
    async def order(self, ctx: RunContext, item_id: str) -> str:
        """Order an item.

        Args:
            item_id: The item
        """
        return f"ordered {item_id}"


@pytest.mark.parametrize(("returned", "output"), [
    (lambda: ToolError("out of stock"), "out of stock"),
    (lambda: RuntimeError("test failure"), "An internal error occurred"),
])
async def test_a_mock_returning_an_exception_is_taken_as_raised(autojump_clock, returned,
                                                                output) -> None:
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="order", arguments='{"item_id": "x"}',
                                               call_id="c1")], input="one x please")
    a.add_llm("Sorry.", input=output)
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        with mock_tools(Shop, {"order": returned}):
            await session.start(Shop())
            result = await session.run(user_input="one x please")
    result.expect.next_event().is_function_call(name="order")
    result.expect.next_event().is_function_call_output(output=output, is_error=True)
    result.expect.next_event().is_message(role="assistant")
    result.expect.no_more_events()


def test_not_given_is_no_criterion() -> None:
    msg = _message_assert("Hello!")
    msg.is_message(role=NOT_GIVEN)
    RunAssert(msg._parent._events).contains_message(role=NOT_GIVEN)  # noqa: SLF001
