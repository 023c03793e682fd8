"""What a function call's life looks like in ``tool_execution_updated`` events.

A call that runs reports ``ToolCallStarted`` once, and ``ToolCallEnded`` once when it ends;
the ended report says how, from the call's outcome (None: cancelled under it).
"""

from __future__ import annotations

from typing import Literal

from .chat import FunctionCall
from .events import ToolCallEnded, ToolCallStarted, ToolExecutionUpdatedEvent
from .tools import ToolOutcome

__all__ = ["call_ended", "call_started"]


def call_started(call: FunctionCall) -> ToolExecutionUpdatedEvent:
    return ToolExecutionUpdatedEvent(update=ToolCallStarted(function_call=call))


def call_ended(call: FunctionCall, outcome: ToolOutcome | None, *, entry_id: str | None = None
               ) -> ToolExecutionUpdatedEvent:
    """The terminal report of ``call``: ``cancelled`` without an outcome, ``error`` with the
    error's text for an error output (an unexpected exception's own text), else ``done`` with
    the output text (None for an empty one: nothing to say). ``entry_id`` defaults to the
    call id."""
    status: Literal["done", "error", "cancelled"]
    message: str | None
    if outcome is None:
        status, message = "cancelled", None
    elif outcome.exception is not None:
        status, message = "error", str(outcome.exception)
    elif outcome.output.is_error:
        status, message = "error", outcome.output.output
    else:
        status, message = "done", outcome.output.output or None
    return ToolExecutionUpdatedEvent(update=ToolCallEnded(
        id=entry_id or call.call_id, call_id=call.call_id, status=status, message=message))
