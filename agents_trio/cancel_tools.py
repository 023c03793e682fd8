"""The tools the model cancels running calls with (LiveKit's names and answers).

When any tool an agent offers is ``ToolFlag.CANCELLABLE``, the model is offered two more, for
the whole time the agent runs (so the tool list stays the same from turn to turn):

- ``lk_agents_get_running_tasks``: the session's running calls that may be cancelled (each as
  the dict of its ``FunctionCall``);
- ``lk_agents_cancel_task(call_id)``: cancels that call and waits until it has ended. A call
  that is not running, not cancellable, or made by a speech that may not be interrupted fails
  with a ``ToolError`` saying which.

A cancelled call that had answered with ``ctx.update()`` reports no final result; its
``tool_call_ended`` event says ``cancelled``.
"""

from __future__ import annotations

from typing import Any

from .chat import FunctionCall
from .run_context import RunContext
from .tool_calls import session_calls
from .tools import FunctionTool, ToolFlag, function_tool

__all__ = ["cancel_task", "get_running_tasks", "with_cancel_tools"]


def _as_dict(call: FunctionCall) -> dict[str, Any]:
    """A call as LiveKit's ``FunctionCall.model_dump()`` gives it (same keys, same order)."""
    return {"id": call.id, "type": call.type, "call_id": call.call_id,
            "arguments": call.arguments, "name": call.name, "created_at": call.created_at,
            "extra": dict(call.extra), "group_id": call.group_id}


@function_tool(name="lk_agents_get_running_tasks")
async def get_running_tasks(ctx: RunContext[Any]) -> list[dict[str, Any]]:
    """Get the list of running tool calls that are cancellable."""
    return [_as_dict(call) for call in session_calls(ctx.session).cancellable()]


@function_tool(name="lk_agents_cancel_task")
async def cancel_task(ctx: RunContext[Any], call_id: str) -> str:
    """Cancel a running tool call by call_id."""
    await session_calls(ctx.session).cancel(call_id)
    return f"Task {call_id} cancelled successfully."


def with_cancel_tools(tools: list[Any]) -> list[Any]:
    """``tools`` (flattened), with the two tools above when one of them is cancellable."""
    if cancel_task in tools:
        return tools
    if any(isinstance(t, FunctionTool) and ToolFlag.CANCELLABLE in t.flags for t in tools):
        return [*tools, cancel_task, get_running_tasks]
    return tools
