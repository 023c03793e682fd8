"""``beta.toolsets``: ToolSearchToolset loads the tools a search finds for the next LLM step;
ToolProxyToolset keeps two fixed tools and runs the found ones by name. Rankings compared with
LiveKit's own strategies on the same tools."""

from __future__ import annotations

import json
from typing import Annotated

import pytest
import trio
from pydantic import Field

from agents_trio import (Agent, AgentSession, ChatContext, FunctionToolCall, ModelSettings,
                         RunContext, function_tool)
from agents_trio.beta.toolsets import (BM25SearchStrategy, KeywordSearchStrategy, SearchItem,
                                       ToolProxyToolset, ToolSearchToolset)
from agents_trio.llm import Toolset
from agents_trio.testing import FakeActions, FakeLLM


@function_tool
async def get_weather(city: Annotated[str, Field(description="the city to look up")]) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@function_tool
async def book_flight(origin: str, destination: str) -> str:
    """Book a flight between two airports.

    Args:
        origin: departure airport code
        destination: arrival airport code
    """
    return f"booked {origin}->{destination}"


@function_tool
async def whoami(ctx: RunContext) -> str:
    """The name of the caller."""
    return ctx.userdata["name"]


class Calendar(Toolset):
    def __init__(self) -> None:
        super().__init__(id="calendar")

    @function_tool
    async def add_event(self, title: str) -> str:
        """Add an event to the calendar."""
        return f"added {title}"

    @function_tool
    async def list_events(self) -> str:
        """List the calendar's events."""
        return "nothing planned"


class Recording(Agent):
    def __init__(self, tools: list) -> None:
        super().__init__(instructions="x", tools=tools)
        self.seen: list[list[str]] = []

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings):
        self.seen.append([t.name for t in tools])
        async for chunk in super().llm_node(chat_ctx, tools, model_settings):
            yield chunk


def _call(name: str, args: dict, cid: str) -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=json.dumps(args), call_id=cid)


async def test_a_search_loads_the_matches_for_the_next_step(autojump_clock) -> None:
    toolset = ToolSearchToolset(id="search", tools=[get_weather, book_flight, Calendar()],
                                max_results=1)
    agent = Recording([toolset])
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("tool_search", {"query": "weather city"}, "s1")],
              input="go")
    a.add_llm("", tool_calls=[_call("get_weather", {"city": "Paris"}, "w1")],
              input="Tools loaded successfully.")
    a.add_llm("done", input="sunny in Paris")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(10):
            result = await session.run(user_input="go")
    assert agent.seen[:3] == [["tool_search"], ["tool_search", "get_weather"],
                              ["tool_search", "get_weather"]]
    outputs = {e.item.call_id: e.item.output for e in result.events
               if e.type == "function_call_output"}
    assert outputs == {"s1": "Tools loaded successfully.", "w1": "sunny in Paris"}


async def test_a_match_inside_a_toolset_loads_the_whole_toolset(autojump_clock) -> None:
    toolset = ToolSearchToolset(id="search", tools=[get_weather, Calendar()], max_results=1)
    await toolset.setup()
    found = await toolset.search("calendar event add")
    assert [type(t).__name__ for t in found] == ["Calendar"]
    with pytest.raises(Exception, match="empty"):
        await toolset.search("  ")
    await toolset.aclose()


async def test_a_search_without_matches_is_a_tool_error(autojump_clock) -> None:
    toolset = ToolSearchToolset(id="search", tools=[get_weather])
    agent = Recording([toolset])
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("tool_search", {"query": "zebra"}, "s1")], input="go")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(10):
            result = await session.run(user_input="go")
    out = next(e.item for e in result.events if e.type == "function_call_output")
    assert out.is_error and "No tools found matching 'zebra'" in out.output
    assert agent.seen[-1] == ["tool_search"]


async def test_the_proxy_keeps_two_tools_and_runs_the_found_ones_with_the_context(
        autojump_clock) -> None:
    toolset = ToolProxyToolset(id="proxy", tools=[get_weather, book_flight, whoami])
    agent = Recording([toolset])
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("tool_search", {"query": "flight"}, "s1"),
                              _call("call_tool", {"name": "book_flight", "parameters": {
                                  "origin": "CDG", "destination": "JFK"}}, "c1"),
                              _call("call_tool", {"name": "whoami", "parameters": {}}, "c2"),
                              _call("call_tool", {"name": "nope", "parameters": {}}, "c3"),
                              _call("call_tool", {"name": "book_flight",
                                                  "parameters": {"origin": "CDG"}}, "c4")],
              input="go")
    async with AgentSession(llm=FakeLLM(a.llm_responses), userdata={"name": "Ada"}) as session:
        await session.start(agent)
        with trio.fail_after(10):
            result = await session.run(user_input="go")
    assert all(seen == ["tool_search", "call_tool"] for seen in agent.seen)
    outputs = {e.item.call_id: e.item for e in result.events
               if e.type == "function_call_output"}
    schema = json.loads(outputs["s1"].output.splitlines()[0])
    assert schema["name"] == "book_flight"
    assert schema["parameters"]["properties"]["origin"]["description"] == "departure airport code"
    assert outputs["c1"].output == "booked CDG->JFK"
    assert outputs["c2"].output == "Ada"
    assert outputs["c3"].is_error and "unknown tool 'nope'" in outputs["c3"].output
    assert outputs["c4"].is_error and "destination" in outputs["c4"].output


def test_bad_construction_fails_at_once() -> None:
    with pytest.raises(ValueError, match="max_results"):
        ToolSearchToolset(id="s", tools=[get_weather], max_results=0)

    async def plain() -> None: ...

    with pytest.raises(ValueError, match="function_tool"):
        ToolSearchToolset(id="s", tools=[plain])


def _items() -> list[tuple[str, str, dict[str, str]]]:
    return [("get_weather", "Current weather for a city.", {"city": "the city to look up"}),
            ("book_flight", "Book a flight between two airports.",
             {"origin": "departure airport code", "destination": "arrival airport code"}),
            ("add_event", "Add an event to the calendar.", {"title": ""}),
            ("list_events", "List the calendar's events.", {}),
            ("cpp_lint", "Lint c++ sources.", {}), ("cs_lint", "Lint c# sources.", {})]


@pytest.mark.parametrize("query", ["weather", "flight airport", "calendar events",
                                   "add event to calendar", "c++", "c#", "lint", "city code",
                                   "zebra", "book, flight!", "^get_"])
@pytest.mark.parametrize("kind", ["bm25", "keyword"])
def test_rankings_are_livekits(query: str, kind: str) -> None:
    from livekit.agents.beta.toolsets import tool_search as lk

    ours_cls = BM25SearchStrategy if kind == "bm25" else KeywordSearchStrategy
    theirs_cls = lk.BM25SearchStrategy if kind == "bm25" else lk.KeywordSearchStrategy
    ours_items = [SearchItem(source=n, name=n, description=d, parameters=p)
                  for n, d, p in _items()]
    theirs_items = [lk.SearchItem(source=n, name=n, description=d, parameters=p)
                    for n, d, p in _items()]
    ours, theirs = ours_cls(), theirs_cls()
    ours.build_index(ours_items)
    theirs.build_index(theirs_items)
    assert [i.name for i in ours.search(query, ours_items, 3)] == \
        [i.name for i in theirs.search(query, theirs_items, 3)]
