"""Tests of agents_trio.tools: decorator, schemas, argument parsing and output mapping."""

from __future__ import annotations

import logging
from typing import Annotated, Any, Optional

import pytest
from pydantic import Field
import trio
import trio.testing

from agents_trio._errors import StopResponse, ToolError
from agents_trio.chat import FunctionCall, FunctionCallOutput
from agents_trio.run_context import RunContext
from agents_trio.tools import (
    FunctionTool,
    ToolFlag,
    ToolOutcome,
    execute_function_call,
    find_function_tools,
    function_tool,
    parse_arguments,
)


class Dummy:
    """Stands in for an Agent in handoff tests."""

    def __init__(self, label: str = "dummy") -> None:
        self.label = label


def is_dummy(x: Any) -> bool:
    return isinstance(x, Dummy)


class MyContext(RunContext[dict]):
    """A RunContext subclass, to check subclasses are skipped too."""


@function_tool
async def get_weather(location: str, ctx: RunContext, unit: str = "celsius",
                      days: int = 3) -> str:
    """Look up the weather
    for a place.

    Longer text that is still part of the summary.

    Args:
        location: The city to look
            the weather up for.
        unit (str): Either celsius or fahrenheit.

    Returns:
        A sentence.
    """
    return f"sunny in {location} ({unit}, {days} days, ctx={ctx!r})"


@function_tool(name="lookup", description="Custom description.",
               flags=ToolFlag.IGNORE_ON_ENTER | ToolFlag.CANCELLABLE)
async def renamed_tool(query: Annotated[str, Field(description="What to look up")],
                       context: RunContext[dict], limit: Optional[int] = None) -> None:
    """Ignored docstring."""


@function_tool
async def with_subclass_context(c: MyContext, value: float) -> float:
    """Double a value."""
    return value * 2


def tool_map(*tools: FunctionTool) -> dict[str, FunctionTool]:
    return {t.name: t for t in tools}


def make_call(name: str, arguments: str = "{}", call_id: str = "call_1") -> FunctionCall:
    return FunctionCall(call_id=call_id, name=name, arguments=arguments)


async def run_returning(value: Any) -> ToolOutcome:
    """Execute a no-argument tool that returns ``value``."""

    @function_tool
    async def give() -> Any:
        """Return the value."""
        return value

    return await execute_function_call(make_call("give"), {"give": give}, make_context=None,
                                       is_agent=is_dummy)


# --------------------------------------------------------------------------------------------
# Schemas


def test_schema_from_signature_and_docstring() -> None:
    assert isinstance(get_weather, FunctionTool)
    assert get_weather.name == "get_weather"
    # the docstring's description keeps its line breaks (LiveKit sends it so)
    assert get_weather.description == (
        "Look up the weather\nfor a place.\n\nLonger text that is still part of the summary.")
    assert get_weather.flags == ToolFlag.NONE
    params = get_weather.parameters_schema
    assert "$ref" not in params
    assert params["type"] == "object"
    assert list(params["properties"]) == ["location", "unit", "days"]
    assert params["required"] == ["location"]
    assert params["properties"]["location"] == {
        "type": "string", "title": "Location",
        "description": "The city to look\nthe weather up for."}
    assert params["properties"]["unit"] == {
        "type": "string", "title": "Unit", "description": "Either celsius or fahrenheit.",
        "default": "celsius"}
    assert params["properties"]["days"] == {"type": "integer", "title": "Days", "default": 3}
    assert get_weather.context_params == ("ctx",)


def test_openai_schema() -> None:
    schema = get_weather.schema
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "get_weather"
    assert schema["function"]["description"] == get_weather.description
    assert schema["function"]["parameters"] == get_weather.parameters_schema


def test_parametrised_decorator_and_annotated_description() -> None:
    assert renamed_tool.name == "lookup"
    assert renamed_tool.description == "Custom description."
    assert renamed_tool.flags == ToolFlag.IGNORE_ON_ENTER | ToolFlag.CANCELLABLE
    assert ToolFlag.CANCELLABLE in renamed_tool.flags
    params = renamed_tool.parameters_schema
    assert list(params["properties"]) == ["query", "limit"]
    assert params["required"] == ["query"]
    assert params["properties"]["query"]["description"] == "What to look up"
    assert renamed_tool.context_params == ("context",)


def test_run_context_subclass_is_skipped() -> None:
    assert with_subclass_context.context_params == ("c",)
    assert list(with_subclass_context.parameters_schema["properties"]) == ["value"]
    assert with_subclass_context.parameters_schema["properties"]["value"] == {
        "type": "number", "title": "Value"}


def test_tool_without_parameters_or_docstring() -> None:
    @function_tool
    def ping():
        return "pong"

    assert ping.description == ""
    assert ping.parameters_schema == {"type": "object", "properties": {},
                                      "title": "PingArgs"}


def test_tool_flag_values() -> None:
    assert (ToolFlag.NONE, ToolFlag.IGNORE_ON_ENTER, ToolFlag.CANCELLABLE) == (0, 1, 2)


def test_return_annotation_may_name_undefined_class() -> None:
    @function_tool
    async def transfer(ctx: RunContext) -> NotDefinedYetAgent:  # noqa: F821
        """Transfer."""

    assert transfer.parameters_schema["properties"] == {}


# --------------------------------------------------------------------------------------------
# Methods and discovery


class BaseAgent:
    def __init__(self, label: str) -> None:
        self.label = label

    @function_tool
    async def first(self, x: int) -> str:
        """First tool.

        Args:
            x: A number.
        """
        return f"{self.label}:first:{x}"

    @function_tool
    async def second(self) -> str:
        """Base second."""
        return "base"

    @function_tool
    async def hidden(self) -> str:
        """Hidden by the subclass."""
        return "hidden"

    def not_a_tool(self) -> None:
        pass


class SubAgent(BaseAgent):
    @function_tool
    async def third(self, ctx: RunContext, y: str = "d") -> str:
        """Third tool."""
        return f"{self.label}:third:{y}"

    @function_tool(name="second_tool")
    async def second(self) -> str:
        """Sub second."""
        return "sub"

    hidden = None


def test_method_tool_drops_self() -> None:
    tool = BaseAgent.first
    assert isinstance(tool, FunctionTool)
    assert tool.is_method
    assert list(tool.parameters_schema["properties"]) == ["x"]
    assert tool.parameters_schema["properties"]["x"] == {"type": "integer", "title": "X",
                                                         "description": "A number."}


async def test_bound_method_tool_passes_self() -> None:
    agent = BaseAgent("a1")
    bound = agent.first
    assert isinstance(bound, FunctionTool)
    assert bound.name == "first"
    assert await bound(x=4) == "a1:first:4"
    assert await BaseAgent.first(agent, 5) == "a1:first:5"
    assert bound == agent.first
    assert bound != BaseAgent("a2").first


async def test_find_function_tools_inheritance_order_and_binding() -> None:
    agent = SubAgent("s")
    tools = find_function_tools(agent)
    assert [t.name for t in tools] == ["first", "second_tool", "third"]
    assert await tools[0](x=1) == "s:first:1"
    assert await tools[1]() == "sub"
    assert await tools[2](ctx=None) == "s:third:d"
    assert [t.name for t in find_function_tools(BaseAgent("b"))] == ["first", "second", "hidden"]


async def test_execute_bound_method_tool_with_context() -> None:
    agent = SubAgent("s")
    tools = {t.name: t for t in find_function_tools(agent)}
    outcome = await execute_function_call(make_call("third", '{"y": "zz"}'), tools,
                                          make_context=lambda c: "CTX", is_agent=is_dummy)
    assert outcome.output.output == "s:third:zz"


# --------------------------------------------------------------------------------------------
# Argument parsing


def test_parse_arguments_ok_and_defaults_filled_in() -> None:
    assert parse_arguments(get_weather, '{"location": "Paris"}') == {
        "location": "Paris", "unit": "celsius", "days": 3}
    assert parse_arguments(get_weather, '{"location": "Paris", "days": "5", "x": 1}') == {
        "location": "Paris", "unit": "celsius", "days": 5}
    # null stands for the default (the strict schema offers it for defaulted parameters)
    assert parse_arguments(get_weather, '{"location": "Paris", "unit": null}') == {
        "location": "Paris", "unit": "celsius", "days": 3}
    assert parse_arguments(with_subclass_context, '{"value": 2}') == {"value": 2.0}
    assert parse_arguments(BaseAgent.second, "") == {}


def test_parse_arguments_missing_field_names_it() -> None:
    with pytest.raises(ToolError) as info:
        parse_arguments(get_weather, '{"unit": "kelvin"}')
    assert info.value.message.startswith("Error parsing arguments for `get_weather`: ")
    assert "\nlocation\n  Field required" in info.value.message


def test_parse_arguments_ill_typed_field_names_it() -> None:
    with pytest.raises(ToolError) as info:
        parse_arguments(get_weather, '{"location": 12}')
    assert info.value.message.startswith("Error parsing arguments for `get_weather`: ")
    assert "\nlocation\n  Input should be a valid string" in info.value.message


@pytest.mark.parametrize("text", ["[1, 2]", '"text"', "3", "{not json"])
def test_parse_arguments_rejects_non_objects(text: str) -> None:
    with pytest.raises(ToolError, match=r"^Error parsing arguments for `get_weather`: "):
        parse_arguments(get_weather, text)


# --------------------------------------------------------------------------------------------
# Execution: output mapping


@pytest.mark.parametrize(("value", "text"), [
    ("hello", "hello"),
    (42, "42"),
    (2.5, "2.5"),
    (True, "True"),
    (1 + 2j, "(1+2j)"),
    # containers are str()'d, as LiveKit does (not JSON); tuples and sets become lists
    ([1, "a", None], "[1, 'a', None]"),
    ((1, "a"), "[1, 'a']"),
    ({"temp": 21, "tags": ["x"]}, "{'temp': 21, 'tags': ['x']}"),
    ({1: True, None: 2}, "{1: True, None: 2}"),
])
async def test_return_values_map_to_output(value: Any, text: str) -> None:
    outcome = await run_returning(value)
    assert outcome.output.output == text
    assert outcome.output.is_error is False
    assert outcome.reply_required is True
    assert outcome.agent is None
    assert outcome.exception is None


async def test_none_return_needs_no_reply() -> None:
    outcome = await run_returning(None)
    assert outcome.output.output == ""
    assert outcome.output.is_error is False
    assert outcome.reply_required is False


@pytest.mark.parametrize("value", [object(), {"k": object()}, [1, {2, 3}, b"bytes"]])
async def test_invalid_return_value(value: Any) -> None:
    outcome = await run_returning(value)
    assert outcome.output.output == "the tool returned an invalid output"
    assert outcome.output.is_error is True
    assert outcome.reply_required is True


async def test_output_identifies_call_and_time(
        autojump_clock: trio.testing.MockClock) -> None:
    @function_tool
    async def slow() -> str:
        """Slow."""
        await trio.sleep(5)
        return "done"

    start = trio.current_time()
    outcome = await execute_function_call(make_call("slow", call_id="c42"), {"slow": slow},
                                          make_context=None, is_agent=is_dummy)
    assert isinstance(outcome.output, FunctionCallOutput)
    assert outcome.output.call_id == "c42"
    assert outcome.output.name == "slow"
    assert outcome.output.created_at == pytest.approx(start + 5, abs=1e-6)


async def test_context_is_built_from_call() -> None:
    made: list[FunctionCall] = []

    def make_context(call: FunctionCall) -> RunContext:
        made.append(call)
        return RunContext(session=object(), speech_handle=object(), function_call=call)

    call = make_call("get_weather", '{"location": "Oslo", "days": 1}')
    outcome = await execute_function_call(call, tool_map(get_weather), make_context=make_context,
                                          is_agent=is_dummy)
    assert made == [call]
    assert outcome.output.output.startswith("sunny in Oslo (celsius, 1 days, ctx=RunContext(")
    assert outcome.reply_required is True


async def test_sync_tool_is_called_directly() -> None:
    @function_tool
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    outcome = await execute_function_call(make_call("add", '{"a": 2}'), {"add": add},
                                          make_context=None, is_agent=is_dummy)
    assert outcome.output.output == "3"


async def test_unknown_function() -> None:
    outcome = await execute_function_call(
        make_call("nope"), tool_map(renamed_tool, get_weather), make_context=None,
        is_agent=is_dummy)
    assert outcome.output.output == "Unknown function: nope - available tools: lookup, get_weather"
    assert outcome.output.is_error is True
    assert outcome.reply_required is True


async def test_bad_arguments_become_error_output() -> None:
    ran = False

    @function_tool
    async def needs_location(location: str) -> str:
        """Needs a location."""
        nonlocal ran
        ran = True
        return location

    outcome = await execute_function_call(
        make_call("needs_location", '{"place": "x"}'), tool_map(needs_location),
        make_context=None, is_agent=is_dummy)
    assert ran is False
    assert outcome.output.is_error is True
    assert outcome.output.output.startswith(
        "Error parsing arguments for `needs_location`: 1 validation error for NeedsLocationArgs"
        "\nlocation\n  Field required")


async def test_tool_error() -> None:
    @function_tool
    async def failing() -> str:
        """Fails."""
        raise ToolError("the city is unknown")

    outcome = await execute_function_call(make_call("failing"), tool_map(failing),
                                          make_context=None, is_agent=is_dummy)
    assert outcome.output.output == "the city is unknown"
    assert outcome.output.is_error is True
    assert outcome.exception is None


async def test_tool_error_inside_nursery_group() -> None:
    @function_tool
    async def failing() -> str:
        """Fails in a child task."""

        async def child() -> None:
            raise ToolError("from a child")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
        return "unreachable"

    outcome = await execute_function_call(make_call("failing"), tool_map(failing),
                                          make_context=None, is_agent=is_dummy)
    assert outcome.output.output == "from a child"
    assert outcome.output.is_error is True


async def test_stop_response() -> None:
    @function_tool
    async def stop() -> str:
        """Stops."""
        raise StopResponse()

    outcome = await execute_function_call(make_call("stop"), tool_map(stop), make_context=None,
                                          is_agent=is_dummy)
    assert outcome.output.output == ""
    assert outcome.output.is_error is False
    assert outcome.reply_required is False
    assert outcome.exception is None


async def test_unexpected_exception_is_hidden_and_logged(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    @function_tool
    async def broken() -> str:
        """Broken."""
        raise ValueError("secret details")

    with caplog.at_level(logging.ERROR, logger="agents_trio"):
        outcome = await execute_function_call(make_call("broken"), tool_map(broken),
                                              make_context=None, is_agent=is_dummy)
    assert outcome.output.output == "An internal error occurred"
    assert outcome.output.is_error is True
    assert outcome.reply_required is True
    assert isinstance(outcome.exception, ValueError)
    assert "secret details" not in outcome.output.output
    assert any(r.exc_info and r.exc_info[1] is outcome.exception for r in caplog.records)


async def test_base_exception_propagates() -> None:
    class Fatal(BaseException):
        pass

    @function_tool
    async def fatal() -> str:
        """Fatal."""
        raise Fatal()

    with pytest.raises(Fatal):
        await execute_function_call(make_call("fatal"), tool_map(fatal), make_context=None,
                                    is_agent=is_dummy)


# --------------------------------------------------------------------------------------------
# Handoffs


async def test_agent_alone_is_a_handoff() -> None:
    target = Dummy()
    outcome = await run_returning(target)
    assert outcome.agent is target
    assert outcome.output.output == ""
    assert outcome.output.is_error is False
    assert outcome.reply_required is False


async def test_agent_with_message_is_a_handoff_with_reply() -> None:
    target = Dummy()
    outcome = await run_returning((target, "transferring"))
    assert outcome.agent is target
    assert outcome.output.output == "transferring"
    assert outcome.reply_required is True


async def test_agent_with_several_values_in_list() -> None:
    target = Dummy()
    outcome = await run_returning([1, target, "two"])
    assert outcome.agent is target
    assert outcome.output.output == "[1, 'two']"
    assert outcome.reply_required is True


async def test_agent_is_not_detected_without_is_agent() -> None:
    @function_tool
    async def give() -> Any:
        """Return an agent."""
        return Dummy()

    outcome = await execute_function_call(make_call("give"), tool_map(give), make_context=None,
                                          is_agent=lambda x: False)
    assert outcome.agent is None
    assert outcome.output.output == "the tool returned an invalid output"


async def test_more_than_one_agent_is_an_error() -> None:
    outcome = await run_returning((Dummy("a"), Dummy("b"), "text"))
    assert outcome.agent is None
    assert outcome.output.output == "the tool returned more than one agent"
    assert outcome.output.is_error is True
    assert outcome.reply_required is True


# --------------------------------------------------------------------------------------------
# Raw schema


async def test_raw_schema_tool() -> None:
    raw = {"name": "raw_tool", "description": "A raw tool.",
           "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                          "required": ["q"]}}

    @function_tool(raw_schema=raw)
    async def anything(raw_arguments: dict[str, object], ctx: RunContext) -> str:
        return f"{raw_arguments['q']}|{ctx}"

    assert anything.name == "raw_tool"
    assert anything.schema["function"] == {"name": "raw_tool", "description": "A raw tool.",
                                           "parameters": raw["parameters"]}
    outcome = await execute_function_call(make_call("raw_tool", '{"q": "hi"}'),
                                          tool_map(anything), make_context=lambda c: "C",
                                          is_agent=is_dummy)
    assert outcome.output.output == "hi|C"


# --------------------------------------------------------------------------------------------
# Cancellation


async def test_cancellation_propagates(
        autojump_clock: trio.testing.MockClock) -> None:
    entered = trio.Event()
    saw_cancel = False

    @function_tool
    async def forever() -> str:
        """Sleeps forever."""
        nonlocal saw_cancel
        entered.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            saw_cancel = True
            raise
        return "never"

    outcome = None
    with trio.move_on_after(1) as scope:
        outcome = await execute_function_call(make_call("forever"), tool_map(forever),
                                              make_context=None, is_agent=is_dummy)
    assert entered.is_set()
    assert scope.cancelled_caught is True
    assert saw_cancel is True
    assert outcome is None
