"""``mock_tools``: a tool's execution replaced for tests (LiveKit's helper), the LLM still
seeing the real tool; the block form over the session form; agents of exactly that class."""

from __future__ import annotations

from typing import Any

import pytest

from agents_trio import (Agent, AgentSession, FunctionToolCall, RunContext, ToolError,
                         function_tool, mock_tools)
from agents_trio.testing import FakeActions, FakeLLM


class Weather(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="weather")

    @function_tool
    async def lookup(self, ctx: RunContext, city: str, unit: str = "C") -> str:
        """Look up the weather.

        Args:
            city: The city.
            unit: C or F.
        """
        return f"real weather in {city}"


class SubWeather(Weather):
    pass


def _llm() -> FakeLLM:
    a = FakeActions()
    a.add_llm("", [FunctionToolCall(call_id="c1", name="lookup",
                                    arguments='{"city": "Paris"}')], input="weather?")
    for answer in ("real weather in Paris", "mocked Paris", "session mock", "block mock"):
        a.add_llm(f"said: {answer}", input=answer)
    return FakeLLM(a.llm_responses)


async def _tool_output(agent: Agent, session: AgentSession) -> str:
    await session.start(agent)
    result = await session.run(user_input="weather?")
    result.expect.next_event().is_function_call(name="lookup")
    return result.expect.next_event().is_function_call_output().event().item.output


async def test_the_block_form_replaces_the_tool_and_ends_with_the_block(autojump_clock) -> None:
    seen: dict[str, Any] = {}

    def fake_lookup(city: str, ctx: RunContext) -> str:   # a subset, in another order
        seen["city"], seen["ctx"] = city, ctx
        return f"mocked {city}"

    llm = _llm()
    with mock_tools(Weather, {"lookup": fake_lookup}):
        async with AgentSession(llm=llm) as session:
            assert await _tool_output(Weather(), session) == "mocked Paris"
    assert seen["city"] == "Paris" and isinstance(seen["ctx"], RunContext)
    # the LLM saw the real tool
    assert [t.name for t in llm.calls[0]["tools"]] == ["lookup"]
    async with AgentSession(llm=_llm()) as session:
        assert await _tool_output(Weather(), session) == "real weather in Paris"


async def test_session_mocks_and_the_block_wins(autojump_clock) -> None:
    async def session_mock() -> str:
        return "session mock"

    async with AgentSession(llm=_llm()) as session:
        mock_tools(Weather, {"lookup": session_mock}, session=session)
        with mock_tools(Weather, {"lookup": lambda **kw: "block mock"}):
            assert await _tool_output(Weather(), session) == "block mock"
    async with AgentSession(llm=_llm()) as session:
        mock_tools(Weather, {"lookup": session_mock}, session=session)
        assert await _tool_output(Weather(), session) == "session mock"
    async with AgentSession(llm=_llm()) as session:
        mock_tools(Weather, {"lookup": session_mock}, session=session)
        mock_tools(Weather, {}, session=session)   # removed
        assert await _tool_output(Weather(), session) == "real weather in Paris"


async def test_mocks_apply_to_exactly_that_class_and_errors_are_the_tools(
        autojump_clock) -> None:
    with mock_tools(Weather, {"lookup": lambda: "mocked Paris"}):
        async with AgentSession(llm=_llm()) as session:
            assert await _tool_output(SubWeather(), session) == "real weather in Paris"

    def failing() -> str:
        raise ToolError("no weather today")

    with mock_tools(Weather, {"lookup": failing}):
        async with AgentSession(llm=_llm()) as session:
            await session.start(Weather())
            result = await session.run(user_input="weather?")
    result.expect.next_event().is_function_call(name="lookup")
    output = result.expect.next_event().is_function_call_output().event().item
    assert output.is_error and "no weather today" in output.output


def test_bad_input_is_refused() -> None:
    with pytest.raises(TypeError, match="class"):
        mock_tools(Weather(), {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not callable"):
        mock_tools(Weather, {"lookup": "x"})  # type: ignore[dict-item]


async def test_the_block_form_reaches_only_speeches_asked_for_inside_it(autojump_clock) -> None:
    """As LiveKit's context variable: a reply asked for inside the block (and its tools) sees
    the mocks; another session's turn running meanwhile, outside the block, does not."""
    import trio

    outputs: dict[str, str] = {}
    block_open = trio.Event()
    block_done = trio.Event()

    async with AgentSession(llm=_llm()) as mocked, AgentSession(llm=_llm()) as real:
        await mocked.start(Weather())
        await real.start(Weather())

        async def in_block() -> None:
            with mock_tools(Weather, {"lookup": lambda city: f"mocked {city}"}):
                block_open.set()
                outputs["mocked"] = await _run_output(mocked)
            block_done.set()

        async def outside() -> None:
            await block_open.wait()
            outputs["real"] = await _run_output(real)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(in_block)
            nursery.start_soon(outside)
        # the block is closed: the first session's next turn runs the real tool again
        assert block_done.is_set()
    assert outputs == {"mocked": "mocked Paris", "real": "real weather in Paris"}


async def _run_output(session: AgentSession) -> str:
    result = await session.run(user_input="weather?")
    result.expect.next_event().is_function_call(name="lookup")
    return result.expect.next_event().is_function_call_output().event().item.output
