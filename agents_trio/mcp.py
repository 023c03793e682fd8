"""MCP servers as tool sources (LiveKit's ``livekit.agents.mcp``), on Trio.

``Agent(mcp_servers=[...])`` (or ``AgentSession(mcp_servers=...)``) connects to each server
when the agent starts, lists its tools and offers them to the LLM next to the agent's own; the
connections live in the agent's activity nursery and close when the agent ends (a handoff, the
session closing), as LiveKit's do. The MCP SDK runs on anyio, so the client runs on Trio
directly: no bridge.

A server can be used on its own too: ``async with server: tools = await server.list_tools()``
keeps the connection open for the block (LiveKit's ``initialize()``/``aclose()`` pair, the
Trio way: the connection needs an owner).

Needs the ``mcp`` package (``pip install 'agents_trio[mcp]'``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

import trio

from ._errors import ToolError
from .tools import FunctionTool, ToolFlag, function_tool

if TYPE_CHECKING:
    import mcp.types
    from mcp import ClientSession

__all__ = ["MCPConnection", "MCPServer", "MCPServerHTTP", "MCPServerStdio", "MCPTool",
           "MCPToolResultContext", "MCPToolResultResolver", "check_mcp_servers",
           "open_mcp_tools"]

logger = logging.getLogger("agents_trio.mcp")

MCPTool = FunctionTool  # a tool of an MCP server: a raw-schema function tool


@dataclasses.dataclass
class MCPToolResultContext:
    """What a :data:`MCPToolResultResolver` is given: the tool, its arguments, the server's
    result."""

    tool_name: str
    arguments: dict[str, Any]
    result: mcp.types.CallToolResult


MCPToolResultResolver = Callable[[MCPToolResultContext], Any]


def _default_result(ctx: MCPToolResultContext) -> str:
    """LiveKit's rule: one content part as its JSON, several as a JSON list of them."""
    content = ctx.result.content
    if len(content) == 1:
        return str(content[0].model_dump_json(by_alias=True))
    if content:
        return json.dumps([part.model_dump(by_alias=True) for part in content],
                          ensure_ascii=False)
    raise ToolError(f"Tool '{ctx.tool_name}' finished without any result.")


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        raise ImportError("MCP servers need the 'mcp' package: "
                          "pip install 'agents_trio[mcp]'") from e


class MCPConnection:
    """One open session with an MCP server (what :meth:`MCPServer.run` gives ``started``).

    Its tools call the server through it; once it is closed they answer the LLM with an
    error instead.
    """

    def __init__(self, server: MCPServer, client: ClientSession) -> None:
        self.server = server
        self._client: ClientSession | None = client
        self._raw_tools: list[mcp.types.Tool] | None = None
        self._closed = trio.Event()

    @property
    def closed(self) -> bool:
        return self._client is None

    def invalidate_cache(self) -> None:
        self._raw_tools = None

    async def list_tools(self) -> list[MCPTool]:
        """The server's tools as function tools (listed once, until ``invalidate_cache``).

        Raises:
            RuntimeError: The connection is closed.

        Cancellation: cancels the request.
        """
        client = self._client
        if client is None:
            raise RuntimeError(f"the connection to {self.server!r} is closed")
        if self._raw_tools is None:
            self._raw_tools = list((await client.list_tools()).tools)
        tools = []
        for t in self._raw_tools:
            try:
                tools.append(self._tool(t.name, t.description, t.input_schema, t.meta))
            except (TypeError, ValueError) as e:
                # a tool no LLM provider would take (its name, its schema): offered, it
                # would fail every request; the server's other tools stay
                logger.warning("MCP tool %r of %r is left out: %s", t.name, self.server, e)
        return self.server.offered(tools)

    def aclose_nowait(self) -> None:
        """Ask :meth:`MCPServer.run` to close this connection."""
        self._closed.set()

    async def wait_closed_requested(self) -> None:
        """Wait until ``aclose_nowait()``.

        Cancellation: a checkpoint only.
        """
        await self._closed.wait()

    def mark_closed(self) -> None:
        self._client = None
        self._raw_tools = None

    def _tool(self, name: str, description: str | None, input_schema: dict[str, Any],
              meta: dict[str, Any] | None) -> MCPTool:
        async def call(raw_arguments: dict[str, Any]) -> object:
            return await self._call(name, raw_arguments)

        raw_schema: dict[str, Any] = {"name": name, "description": description,
                                      "parameters": input_schema}
        if meta:
            raw_schema["meta"] = meta
        return function_tool(call, raw_schema=raw_schema, flags=ToolFlag.NONE)

    async def _call(self, name: str, arguments: dict[str, Any]) -> object:
        import mcp.types

        client = self._client
        if client is None:  # called after the connection closed
            raise ToolError("Tool invocation failed: the MCP server is not connected.")
        result = await client.call_tool(name, arguments)
        if not isinstance(result, mcp.types.CallToolResult):
            raise ToolError(f"Tool '{name}' returned an unexpected MCP result "
                            f"({type(result).__name__}).")
        if result.is_error:
            raise ToolError("\n".join(getattr(part, "text", None) or str(part)
                                       for part in result.content))
        return await self.server.resolve_result(MCPToolResultContext(
            tool_name=name, arguments=arguments, result=result))


class MCPServer:
    """Where an MCP server is and how to reach it (subclasses: :meth:`client_streams`).

    Each agent that lists the server opens its own connection (:meth:`run`) when it starts
    and closes it when it ends. ``async with server:`` opens one for the block, which
    :meth:`list_tools` then uses (LiveKit's ``initialize()``/``aclose()``).

    Args:
        client_session_timeout_seconds: How long a request to the server may take.
        tool_result_resolver: Turns a tool's MCP result into the tool's output (default:
            LiveKit's, the result's content as JSON); may be async.
    """

    def __init__(self, *, client_session_timeout_seconds: float,
                 tool_result_resolver: MCPToolResultResolver | None = None) -> None:
        _require_mcp()
        if client_session_timeout_seconds < 0:
            raise ValueError("client_session_timeout_seconds must be >= 0")
        self._read_timeout = client_session_timeout_seconds
        self._resolve_result = tool_result_resolver or _default_result
        self._own: MCPConnection | None = None
        self._exit_stack: contextlib.AsyncExitStack | None = None

    @property
    def initialized(self) -> bool:
        """Whether the ``async with`` connection is open."""
        return self._own is not None and not self._own.closed

    def invalidate_cache(self) -> None:
        """Forget the listed tools of the ``async with`` connection."""
        if self._own is not None:
            self._own.invalidate_cache()

    def client_streams(self) -> AbstractAsyncContextManager[Any]:
        """The transport: an async context manager giving the (read, write) streams."""
        raise NotImplementedError

    def offered(self, tools: list[MCPTool]) -> list[MCPTool]:
        """The tools offered to the LLM out of the server's (all, unless a subclass filters)."""
        return tools

    async def resolve_result(self, ctx: MCPToolResultContext) -> object:
        """The tool output for an MCP result, through ``tool_result_resolver``.

        Cancellation: cancels an async resolver.
        """
        resolved = self._resolve_result(ctx)
        if inspect.isawaitable(resolved):
            resolved = await resolved
        return resolved

    async def run(self, *, task_status: trio.TaskStatus[MCPConnection] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Open a connection, give it to ``task_status`` once the MCP session is initialized,
        and hold it until its ``aclose_nowait()`` (use with ``nursery.start``).

        Raises:
            Exception: Whatever connecting raised (the MCP SDK's errors), before ``started``.

        Cancellation: closes the connection (and the server process, for stdio).
        """
        from mcp import ClientSession

        connection: MCPConnection | None = None
        try:
            async with self.client_streams() as streams, ClientSession(
                    streams[0], streams[1], read_timeout_seconds=self._read_timeout or None
            ) as client:
                await client.initialize()
                connection = MCPConnection(self, client)
                task_status.started(connection)
                await connection.wait_closed_requested()
        finally:
            if connection is not None:
                connection.mark_closed()

    async def list_tools(self) -> list[MCPTool]:
        """The tools of the ``async with`` connection.

        Raises:
            RuntimeError: Not inside ``async with server``.

        Cancellation: cancels the request.
        """
        if self._own is None:
            raise RuntimeError(f"{self!r} is not connected: use `async with server:` (or "
                               "pass it in mcp_servers=, which connects per agent)")
        return await self._own.list_tools()

    async def __aenter__(self) -> MCPServer:
        """Open a connection for the block.

        Cancellation: cancels the connect.
        """
        if self._exit_stack is not None:
            raise RuntimeError(f"{self!r} is already open")
        stack = contextlib.AsyncExitStack()
        nursery = await stack.enter_async_context(trio.open_nursery())
        try:
            self._own = await nursery.start(self.run)
        except BaseException:
            await stack.aclose()
            raise
        self._exit_stack = stack
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        """Close the block's connection.

        Cancellation: as :meth:`aclose`.
        """
        await self.aclose()

    async def aclose(self) -> None:
        """Close the ``async with`` connection (nothing if none is open).

        Cancellation: the close finishes first (the MCP SDK's own shutdown is shielded).
        """
        own, stack = self._own, self._exit_stack
        self._own, self._exit_stack = None, None
        if own is not None:
            own.aclose_nowait()
        if stack is not None:
            await stack.aclose()
        else:
            await trio.lowlevel.checkpoint()


class MCPServerHTTP(MCPServer):
    """An MCP server over HTTP: streamable HTTP when the URL's path ends in ``/mcp`` (or
    ``transport_type="streamable_http"``), else SSE, as LiveKit chooses.

    Args:
        url: The server's URL.
        transport_type: ``"sse"`` or ``"streamable_http"``; None: chosen from the URL.
        allowed_tools: Only these tools are offered (None: all).
        headers: HTTP headers sent with each request.
        timeout: Connect timeout (seconds).
        sse_read_timeout: Read timeout of the event stream (seconds).
        client_session_timeout_seconds: How long a request may take.
        tool_result_resolver: See :class:`MCPServer`.

    Raises:
        ValueError: An unknown ``transport_type``.
    """

    def __init__(self, url: str,
                 transport_type: Literal["sse", "streamable_http"] | None = None,
                 allowed_tools: list[str] | None = None, headers: dict[str, Any] | None = None,
                 timeout: float = 5, sse_read_timeout: float = 60 * 5,
                 client_session_timeout_seconds: float = 5, *,
                 tool_result_resolver: MCPToolResultResolver | None = None) -> None:
        super().__init__(client_session_timeout_seconds=client_session_timeout_seconds,
                         tool_result_resolver=tool_result_resolver)
        if transport_type not in (None, "sse", "streamable_http"):
            raise ValueError(f"transport_type must be 'sse' or 'streamable_http', "
                             f"got {transport_type!r}")
        self.url = url
        self.headers: dict[str, Any] = dict(headers or {})
        self._timeout = timeout
        self._sse_read_timeout = sse_read_timeout
        self._allowed_tools = set(allowed_tools) if allowed_tools else None
        self._streamable = (transport_type == "streamable_http" if transport_type is not None
                            else urlparse(url).path.lower().rstrip("/").endswith("/mcp"))

    def client_streams(self) -> AbstractAsyncContextManager[Any]:
        if self._streamable:
            return self._streamable_http()
        from mcp.client.sse import sse_client

        return sse_client(url=self.url, headers=self.headers, timeout=self._timeout,
                          sse_read_timeout=self._sse_read_timeout)

    @asynccontextmanager
    async def _streamable_http(self) -> AsyncIterator[Any]:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(self._timeout, read=self._sse_read_timeout)
        async with httpx2.AsyncClient(timeout=timeout, headers=self.headers) as http, \
                streamable_http_client(url=self.url, http_client=http) as streams:
            yield streams

    def offered(self, tools: list[MCPTool]) -> list[MCPTool]:
        if self._allowed_tools is None:
            return tools
        return [t for t in tools if t.name in self._allowed_tools]

    def __repr__(self) -> str:
        transport = "streamable_http" if self._streamable else "sse"
        allowed = f", allowed_tools={sorted(self._allowed_tools)}" if self._allowed_tools else ""
        return f"MCPServerHTTP(url={self.url}, transport={transport}{allowed})"


class MCPServerStdio(MCPServer):
    """An MCP server run as a child process, spoken to over its stdin and stdout.

    Args:
        command: The program.
        args: Its arguments.
        env: Its environment (None: the MCP SDK's default, a safe subset of ours).
        cwd: Its working directory.
        client_session_timeout_seconds: How long a request may take.
        tool_result_resolver: See :class:`MCPServer`.
    """

    def __init__(self, command: str, args: list[str], env: dict[str, str] | None = None,
                 cwd: str | Path | None = None, client_session_timeout_seconds: float = 5, *,
                 tool_result_resolver: MCPToolResultResolver | None = None) -> None:
        super().__init__(client_session_timeout_seconds=client_session_timeout_seconds,
                         tool_result_resolver=tool_result_resolver)
        if not command:
            raise ValueError("command must not be empty")
        self.command = command
        self.args = list(args)
        self.env = env
        self.cwd = cwd

    def client_streams(self) -> AbstractAsyncContextManager[Any]:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        return stdio_client(StdioServerParameters(
            command=self.command, args=self.args, env=self.env, cwd=self.cwd))

    def __repr__(self) -> str:
        return f"MCPServerStdio(command={self.command}, args={self.args}, cwd={self.cwd})"


def check_mcp_servers(owner: str, servers: object) -> list[MCPServer] | None:
    """``mcp_servers=`` as given to ``owner``: a list of :class:`MCPServer` (an empty one is
    None, as in LiveKit).

    Raises:
        TypeError: Not a list of MCP servers.
    """
    if servers is None:
        return None
    if not isinstance(servers, (list, tuple)) or not all(
            isinstance(s, MCPServer) for s in servers):
        raise TypeError(f"{owner}(mcp_servers=...) takes a list of MCPServer "
                        f"(MCPServerHTTP, MCPServerStdio), got {servers!r}")
    return list(servers) or None


async def open_mcp_tools(nursery: trio.Nursery, servers: list[MCPServer]) -> list[MCPTool]:
    """Connect ``servers`` concurrently, the connections owned by ``nursery`` (they close
    when it is cancelled), and return their tools in server order. A server that fails to
    connect or to list its tools is logged and left out, as in LiveKit: the agent starts
    without its tools.

    Cancellation: cancels the connects still in progress.
    """
    found: dict[int, list[MCPTool]] = {}

    async def connect(index: int, server: MCPServer) -> None:
        connection: MCPConnection | None = None
        try:
            connection = await nursery.start(server.run)
            found[index] = await connection.list_tools()
        except Exception:
            logger.exception("MCP server %r could not be used; its tools are left out", server)
            if connection is not None:
                connection.aclose_nowait()

    async with trio.open_nursery() as connecting:
        for index, server in enumerate(servers):
            connecting.start_soon(connect, index, server)
    return [tool for index in sorted(found) for tool in found[index]]
