"""Toolsets and provider tools, and the flat list of tools an LLM is given.

An agent's ``tools=`` (and the session's) may mix function tools, provider tools (tools the
model provider runs itself, passed to the LLM as they are) and :class:`Toolset` objects,
groups of tools with a lifetime: ``setup()`` when an agent starts, ``aclose()`` when it ends
(a session's toolsets: when the session closes). :func:`flatten_tools` turns such a list into
what the LLM sees, as LiveKit's ``ToolContext.flatten()`` does: the function tools (toolsets
unwrapped, depth first), then the provider tools.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import trio

from .tools import FunctionTool, find_function_tools

__all__ = ["ProviderTool", "Toolset", "aclose_toolsets", "flatten_tools", "function_tool_names",
           "setup_toolsets", "toolsets_in"]

logger = logging.getLogger("agents_trio")


class ProviderTool:
    """A tool the model provider runs itself (a web search, code execution…): given to the
    LLM as it is, never executed by the runtime.

    Attributes:
        id: The tool's unique id.
    """

    def __init__(self, *, id: str) -> None:
        self._id = id

    @property
    def id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._id!r})"


class Toolset:
    """A group of tools (function tools, provider tools, nested toolsets) with a lifetime.

    The ``@function_tool`` methods of a subclass belong to it too. An agent given the toolset
    in ``tools=`` calls :meth:`setup` when it starts and :meth:`aclose` when it ends; a
    session given it closes it when the session closes.

    Attributes:
        id: The toolset's id.
        tools: Its tools, as given, then its own ``@function_tool`` methods.
    """

    @dataclasses.dataclass
    class ToolCalledEvent:
        """A tool of the set was called (for toolsets that report their calls)."""

        ctx: Any
        arguments: dict[str, Any]

    @dataclasses.dataclass
    class ToolCompletedEvent:
        """A tool of the set finished (its output or the exception it raised)."""

        ctx: Any
        output: Any

    def __init__(self, *, id: str, tools: Sequence[Any] | None = None) -> None:
        self._id = id
        self._tools: list[Any] = [*(tools or ()), *find_function_tools(self)]

    @property
    def id(self) -> str:
        return self._id

    @property
    def tools(self) -> list[Any]:
        return self._tools

    async def setup(self) -> Toolset:
        """Prepare the toolset: its nested toolsets are set up concurrently.

        Cancellation: cancels the nested setups.
        """
        async with trio.open_nursery() as nursery:
            for toolset in self._nested():
                nursery.start_soon(toolset.setup)
        return self

    async def aclose(self) -> None:
        """Release what the toolset holds: its nested toolsets are closed concurrently.

        Cancellation: cancels the nested closes.
        """
        async with trio.open_nursery() as nursery:
            for toolset in self._nested():
                nursery.start_soon(toolset.aclose)

    def _nested(self) -> list[Toolset]:
        return [t for t in self._tools if isinstance(t, Toolset)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._id!r})"


def _is_provider_tool(tool: object) -> bool:
    """Ours, or a provider's tool object (e.g. a LiveKit plugin's): not callable, has an id."""
    return isinstance(tool, ProviderTool) or (
        not callable(tool) and isinstance(getattr(tool, "id", None), str))


def flatten_tools(tools: Iterable[Any]) -> list[Any]:
    """The tools an LLM is given: the function tools (toolsets unwrapped, depth first, one
    per name), then the provider tools.

    Raises:
        ValueError: Two different function tools share a name (the same tool twice is
            fine), or an item is not a tool (e.g. a function without ``@function_tool``).
    """
    functions: dict[str, FunctionTool] = {}
    providers: list[Any] = []
    for tool in tools:
        _add_tool(tool, functions, providers)
    return [*functions.values(), *providers]


def _add_tool(tool: object, functions: dict[str, FunctionTool], providers: list[Any]) -> None:
    # a module-level function, not a closure: a recursive closure is a reference cycle, left
    # to the cyclic collector on every call (several per LLM step)
    if isinstance(tool, FunctionTool):
        known = functions.get(tool.name)
        if known is not None and known != tool:
            raise ValueError(f"duplicate function name: {tool.name}")
        functions[tool.name] = tool
    elif isinstance(tool, Toolset):
        for member in tool.tools:
            _add_tool(member, functions, providers)
    elif _is_provider_tool(tool):
        providers.append(tool)
    elif callable(tool):
        raise ValueError(f"{tool!r} is not a tool: decorate it with @function_tool")
    else:
        raise ValueError(f"unknown tool type: {type(tool).__name__}")


def function_tool_names(tools: Iterable[Any]) -> list[str]:
    """The names of the function tools in ``tools`` (toolsets unwrapped)."""
    return [t.name for t in flatten_tools(tools) if isinstance(t, FunctionTool)]


def toolsets_in(tools: Iterable[Any]) -> list[Toolset]:
    """The top-level toolsets of ``tools`` (their nested ones are theirs to manage)."""
    return [t for t in tools if isinstance(t, Toolset)]


async def setup_toolsets(tools: Iterable[Any]) -> None:
    """Set up the toolsets of ``tools`` concurrently (an agent starting).

    Cancellation: cancels the setups.
    """
    async with trio.open_nursery() as nursery:
        for toolset in toolsets_in(tools):
            nursery.start_soon(toolset.setup)


async def aclose_toolsets(tools: Iterable[Any]) -> None:
    """Close the toolsets of ``tools`` concurrently; one failing is logged, not raised (the
    others still close).

    Cancellation: cancels the closes.
    """

    async def close(toolset: Toolset) -> None:
        try:
            await toolset.aclose()
        except Exception:
            logger.exception("closing toolset %r failed", toolset.id)

    async with trio.open_nursery() as nursery:
        for toolset in toolsets_in(tools):
            nursery.start_soon(close, toolset)
