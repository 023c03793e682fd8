"""``AsyncToolset``: tools whose background work follows the conversation across handoffs.

A toolset given to the *session* (``AgentSession(tools=[AsyncToolset(...)])``) is
session-scoped, as in LiveKit: its calls run in the session's own nursery, not the agent's, so
a handoff neither cancels nor waits for them; what they report after their first answer
(``ctx.update()``, the final result) goes to whichever agent is current then, and their
``foreground()`` and fillers follow that agent too. Duplicates (``on_duplicate``) are judged
among the session-scoped calls, whatever agent made them. The session closing cancels them.

Given to an *agent*, an ``AsyncToolset`` behaves as the agent's other tools (a handoff cancels
its ``CANCELLABLE`` calls and waits for the others) except for its templates.

``tool_handling=`` sets the toolset's templates (``agents_trio.tool_handling``); they win over
the agent's and the session's. Not set: a session-scoped toolset takes the session's, an
agent's toolset the agent's (or else the session's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .tool_handling import AsyncToolOptions, ToolHandlingOptions, check_tool_handling
from .tools import FunctionTool
from .toolsets import Toolset

__all__ = ["AsyncToolset", "async_toolsets_by_tool"]


class AsyncToolset(Toolset):
    """A toolset whose tools' background work survives handoffs (see the module docs).

    Args:
        id: The toolset's id.
        tools: Its tools (function tools, provider tools, nested toolsets).
        tool_handling: ``{"async_options": {...}}``: the toolset's templates.
        on_duplicate_call: LiveKit's removed keyword: refused (set ``on_duplicate=`` on each
            ``@function_tool``).

    Raises:
        TypeError: ``on_duplicate_call`` is given, or ``tool_handling`` is not a dict of
            templates.
        ValueError: ``tool_handling`` has an unknown key.
    """

    def __init__(self, *, id: str, tools: Sequence[Any] | None = None,
                 tool_handling: ToolHandlingOptions | None = None,
                 on_duplicate_call: object = None) -> None:
        if on_duplicate_call is not None:
            raise TypeError("AsyncToolset(on_duplicate_call=...) is no longer supported: set "
                            "on_duplicate=... on each @function_tool instead")
        super().__init__(id=id, tools=tools)
        #: the toolset's own templates (None: the agent's or the session's)
        self.async_tool_options: AsyncToolOptions | None = check_tool_handling(
            "AsyncToolset", tool_handling)


def async_toolsets_by_tool(tools: Iterable[Any]) -> dict[str, AsyncToolset]:
    """The function tools of ``tools`` that belong to an ``AsyncToolset``, by name, each with
    the innermost such toolset holding it."""
    found: dict[str, AsyncToolset] = {}
    for tool in tools:
        _note_async_owners(tool, None, found)
    return found


def _note_async_owners(tool: object, owner: AsyncToolset | None, found: dict[str, AsyncToolset]) -> None:
    # not a closure: a recursive closure is a reference cycle, left to the cyclic collector
    if isinstance(tool, FunctionTool):
        if owner is not None:
            found.setdefault(tool.name, owner)
    elif isinstance(tool, Toolset):
        inner = tool if isinstance(tool, AsyncToolset) else owner
        for member in tool.tools:
            _note_async_owners(member, inner, found)
