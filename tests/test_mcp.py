"""MCP servers as tool sources (``mcp_servers=``), with a real MCP server over stdio (the MCP
SDK's own, in a child process). Real time: the child's I/O is real, so no autojump clock (it
would fire the request timeouts while the child works); nothing here asserts on durations."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import trio

pytest.importorskip("mcp")

from agents_trio import Agent, AgentSession, ChatContext, FunctionToolCall, ModelSettings  # noqa: E402
from agents_trio.mcp import MCPServerHTTP, MCPServerStdio  # noqa: E402
from agents_trio.testing import FakeActions, FakeLLM  # noqa: E402

SERVER = str(Path(__file__).parent / "data" / "mcp_calc_server.py")


def calc_server() -> MCPServerStdio:
    return MCPServerStdio(sys.executable, [SERVER], client_session_timeout_seconds=30)


class Recording(Agent):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(instructions="x", **kwargs)  # type: ignore[arg-type]
        self.seen: list[list[str]] = []

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings):
        self.seen.append([t.name for t in tools])
        async for chunk in super().llm_node(chat_ctx, tools, model_settings):
            yield chunk


def calls(*items: tuple[str, str, str]) -> FakeActions:
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name=name, arguments=args, call_id=cid)
                              for name, args, cid in items], input="go")
    return a


async def test_an_agents_mcp_tools_are_offered_and_answer_through_the_server() -> None:
    agent = Recording(mcp_servers=[calc_server()])
    a = calls(("add", '{"a": 2, "b": 3}', "c1"), ("fail", '{"reason": "no"}', "c2"))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(60):
            result = await session.run(user_input="go")
    assert agent.seen[0] == ["add", "fail", "secret"]
    outputs = {e.item.call_id: e.item for e in result.events
               if e.type == "function_call_output"}
    # LiveKit's default resolver: the single content part, as its JSON
    assert '"text":"5"' in outputs["c1"].output and not outputs["c1"].is_error
    assert outputs["c2"].is_error and "fail" in outputs["c2"].output


async def test_session_servers_serve_every_agent_unless_the_agent_gives_its_own() -> None:
    session_server = calc_server()
    plain = Recording()
    opted_out = Recording(mcp_servers=None)  # given: none, not the session's
    async with AgentSession(llm=FakeLLM([]), mcp_servers=[session_server]) as session:
        await session.start(plain)
        with trio.fail_after(60):
            await session.run(user_input="hello")
        session.update_agent(opted_out)
        with trio.fail_after(60):
            await session.wait_for_idle()
            await session.run(user_input="hello again")
    assert plain.seen[-1] == ["add", "fail", "secret"]
    assert opted_out.seen[-1] == []


async def test_the_connection_closes_with_the_agent_and_its_tools_then_refuse() -> None:
    server = calc_server()
    agent = Recording(mcp_servers=[server])
    async with AgentSession(llm=FakeLLM([])) as session:
        await session.start(agent)
        with trio.fail_after(60):
            await session.run(user_input="hello")
        tools = agent.seen[-1]
        assert tools
    # the session closed: the server process is gone; using the server again reconnects
    async with server:
        assert [t.name for t in await server.list_tools()] == ["add", "fail", "secret"]
    assert not server.initialized
    with pytest.raises(RuntimeError, match="not connected"):
        await server.list_tools()


async def test_a_server_that_cannot_start_leaves_the_agent_working_without_its_tools(
        caplog: pytest.LogCaptureFixture) -> None:
    broken = MCPServerStdio(sys.executable, ["-c", "import sys; sys.exit(3)"],
                            client_session_timeout_seconds=30)
    agent = Recording(mcp_servers=[broken, calc_server()])
    with caplog.at_level(logging.ERROR, logger="agents_trio.mcp"):
        async with AgentSession(llm=FakeLLM([])) as session:
            await session.start(agent)
            with trio.fail_after(60):
                await session.run(user_input="hello")
    assert agent.seen[-1] == ["add", "fail", "secret"]
    assert any("could not be used" in r.getMessage() for r in caplog.records)


def test_bad_mcp_servers_fail_at_construction() -> None:
    with pytest.raises(TypeError, match="mcp_servers"):
        Agent(instructions="x", mcp_servers=["http://localhost/mcp"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="mcp_servers"):
        AgentSession(mcp_servers=[object()])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="transport_type"):
        MCPServerHTTP("http://x/mcp", transport_type="websocket")  # type: ignore[arg-type]


def test_http_transport_is_chosen_from_the_url_as_livekit_does() -> None:
    assert "streamable_http" in repr(MCPServerHTTP("http://h/api/mcp"))
    assert "transport=sse" in repr(MCPServerHTTP("http://h/sse"))
    assert "transport=sse" in repr(MCPServerHTTP("http://h/other"))
    assert "streamable_http" in repr(MCPServerHTTP("http://h/sse", transport_type="streamable_http"))
    assert "allowed_tools=['add']" in repr(MCPServerHTTP("http://h/mcp", allowed_tools=["add"]))


async def test_a_server_tool_no_provider_accepts_is_left_out_and_the_others_stay(
        caplog: pytest.LogCaptureFixture) -> None:
    # offered, it would fail every LLM request; refusing it must not take the server's other
    # tools with it
    odd = MCPServerStdio(sys.executable, [str(Path(__file__).parent / "data" /
                                              "mcp_odd_names_server.py")],
                         client_session_timeout_seconds=30)
    agent = Recording(mcp_servers=[odd])
    a = calls(("add", '{"a": 2, "b": 3}', "c1"))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(60):
            await session.run(user_input="go")
    assert agent.seen[0] == ["add"]
    assert any("get weather" in r.getMessage() for r in caplog.records
               if r.levelno >= logging.WARNING)
