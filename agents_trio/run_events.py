"""Run events: what a ``RunResult`` records while a run is active (see ``run_result``).

They live below ``run_result`` and the ``expect`` DSL (``agents_trio.testing.expect``), which
both read them; ``run_result`` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Union

from .chat import AgentHandoff, ChatMessage, FunctionCall, FunctionCallOutput

__all__ = ["AgentHandoffEvent", "ChatMessageEvent", "EventType", "FunctionCallEvent",
           "FunctionCallOutputEvent", "RunEvent"]

EventType = Literal["message", "function_call", "function_call_output", "agent_handoff"]


@dataclass
class ChatMessageEvent:
    """An assistant message produced during the run.

    Attributes:
        item: The chat message.
        type: Always ``"message"``.
    """

    item: ChatMessage
    type: Literal["message"] = "message"


@dataclass
class FunctionCallEvent:
    """A tool call the LLM made during the run.

    Attributes:
        item: The function call.
        type: Always ``"function_call"``.
    """

    item: FunctionCall
    type: Literal["function_call"] = "function_call"


@dataclass
class FunctionCallOutputEvent:
    """The output of a tool call made during the run.

    Attributes:
        item: The function call output.
        type: Always ``"function_call_output"``.
    """

    item: FunctionCallOutput
    type: Literal["function_call_output"] = "function_call_output"


@dataclass
class AgentHandoffEvent:
    """The session switched agents during the run.

    Attributes:
        item: The handoff chat item.
        old_agent: The agent handed off from (None at session start).
        new_agent: The agent handed off to.
        type: Always ``"agent_handoff"``.
    """

    item: AgentHandoff
    old_agent: Any
    new_agent: Any
    type: Literal["agent_handoff"] = "agent_handoff"


RunEvent = Union[ChatMessageEvent, FunctionCallEvent, FunctionCallOutputEvent, AgentHandoffEvent]
