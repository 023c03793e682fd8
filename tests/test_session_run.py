"""``session.run()``: the text-only entry point and its RunResult."""

from __future__ import annotations

import functools

import pytest
import trio

from agents_trio import (Agent, AgentSession, APIError, FunctionToolCall, RunContext, ToolError,
                         function_tool)
from agents_trio.testing import FakeActions, FakeLLM


class Weather(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You answer weather questions.")

    @function_tool
    async def get_weather(self, ctx: RunContext, location: str) -> str:
        """Get the weather.

        Args:
            location: The city
        """
        if location == "Atlantis":
            raise ToolError("unknown city")
        await trio.sleep(0.5)
        return f"sunny in {location}"


def _text_session(actions: FakeActions, **kwargs) -> AgentSession:
    return AgentSession(llm=FakeLLM(actions.llm_responses), **kwargs)


async def test_run_records_messages_calls_and_outputs_in_order(autojump_clock):
    a = FakeActions()
    a.add_llm("Let me look.", tool_calls=[FunctionToolCall(
        name="get_weather", arguments='{"location": "Paris"}', call_id="c1")],
        input="weather in Paris?")
    a.add_llm("It is sunny in Paris.", input="sunny in Paris")
    async with _text_session(a) as session:
        await session.start(Weather())
        with trio.fail_after(10):
            result = await session.run(user_input="weather in Paris?")
        result.expect.next_event().is_message(role="assistant")
        result.expect.next_event().is_function_call(name="get_weather",
                                                    arguments={"location": "Paris"})
        result.expect.next_event().is_function_call_output(output="sunny in Paris")
        msg = result.expect.next_event().is_message(role="assistant").event().item
        assert msg.text_content == "It is sunny in Paris."
        result.expect.no_more_events()
        user = [i for i in session.history.items if getattr(i, "role", None) == "user"]
        assert [u.text_content for u in user] == ["weather in Paris?"]
        assert session.agent_state == "listening"


async def test_run_with_a_tool_error_lets_the_model_answer_it(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(
        name="get_weather", arguments='{"location": "Atlantis"}', call_id="c1")],
        input="weather in Atlantis?")
    a.add_llm("I don't know that city.", input="unknown city")
    async with _text_session(a) as session:
        await session.start(Weather())
        with trio.fail_after(10):
            result = await session.run(user_input="weather in Atlantis?")
        result.expect.next_event().is_function_call(name="get_weather")
        result.expect.next_event().is_function_call_output(output="unknown city", is_error=True)
        result.expect.next_event().is_message(role="assistant")
        result.expect.no_more_events()


async def test_nested_runs_are_refused(autojump_clock):
    a = FakeActions()
    a.add_llm("slow answer", input="one", ttft=1.0, duration=2.0)
    async with _text_session(a) as session:
        await session.start(Weather())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(session.run, user_input="one"))
            await trio.sleep(0.1)
            with pytest.raises(RuntimeError, match="nested runs"):
                await session.run(user_input="two")


async def test_a_failing_llm_is_raised_by_run_and_emitted(autojump_clock):
    a = FakeActions()
    a.add_llm_error(APIError("the model is down"), input="hello")
    async with _text_session(a) as session:
        errors = []
        session.on("error", errors.append)
        await session.start(Weather())
        with trio.fail_after(10), pytest.raises(APIError, match="the model is down"):
            await session.run(user_input="hello")
        assert [str(e.error) for e in errors] == ["the model is down"]
        assert errors[0].source is session.llm
        assert session.agent_state == "listening"


async def test_unrecoverable_errors_close_the_session_after_the_limit(autojump_clock):
    a = FakeActions()
    a.add_llm_error(APIError("the model is down"), input="hello")
    async with _text_session(a, max_unrecoverable_errors=2) as session:
        closes = []
        session.on("close", closes.append)
        await session.start(Weather())
        for _ in range(3):
            with trio.fail_after(10), pytest.raises(APIError):
                await session.run(user_input="hello")
        with trio.fail_after(10):
            await trio.sleep(1)
        assert [(c.reason, str(c.error)) for c in closes] == [("error", "the model is down")]


async def test_recoverable_errors_do_not_close_the_session(autojump_clock):
    a = FakeActions()
    a.add_llm_error(APIError("busy, retry", recoverable=True), input="hello")
    async with _text_session(a, max_unrecoverable_errors=0) as session:
        closes = []
        session.on("close", closes.append)
        await session.start(Weather())
        for _ in range(2):
            with pytest.raises(APIError):
                await session.run(user_input="hello")
        await trio.sleep(1)
        assert closes == []


async def test_run_fails_when_the_session_closes(autojump_clock):
    a = FakeActions()
    a.add_llm("a very slow answer", input="hi", ttft=30.0, duration=31.0)
    async with _text_session(a) as session:
        await session.start(Weather())
        async with trio.open_nursery() as nursery:
            async def close_soon() -> None:
                await trio.sleep(1.0)
                await session.aclose()

            nursery.start_soon(close_soon)
            with trio.fail_after(10), pytest.raises(RuntimeError, match="session closed"):
                await session.run(user_input="hi")
