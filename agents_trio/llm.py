"""``agents_trio.llm``: LiveKit's ``livekit.agents.llm`` names, on this runtime's objects.

The chat context and its items, function tools, and the model protocols a model author
implements (``LLM``, ``RealtimeModel``: Trio-native here; a LiveKit plugin object goes through
``agents_trio.plugins.adapt()``). Names of ``livekit.agents.llm`` absent here are listed in
docs/livekit-names.md.
"""

from __future__ import annotations

from ._errors import StopResponse, ToolError
from .fallback.llm import AvailabilityChangedEvent, FallbackAdapter
from .chat import (AgentConfigUpdate, AgentHandoff, AudioContent, ChatContent, ChatContext,
                   ChatItem, ChatMessage, ChatRole, FunctionCall, FunctionCallOutput,
                   ImageContent)
from .instructions import Instructions
from .models import (LLM, ChatChunk, ChoiceDelta, CompletionUsage, FunctionToolCall, LLMStream,
                     ToolChoice)
from .realtime import (GenerationCreatedEvent, InputSpeechStartedEvent, InputSpeechStoppedEvent,
                       InputTranscriptionCompleted, MessageGeneration, RealtimeCapabilities,
                       RealtimeError, RealtimeModel, RealtimeSession)
from .tools import FunctionTool, RawFunctionTool, ToolFlag, ToolResult, function_tool
from .async_toolset import AsyncToolset
from .toolsets import ProviderTool, Toolset

__all__ = [
    "AsyncToolset",
    "AgentConfigUpdate", "AgentHandoff", "AudioContent", "AvailabilityChangedEvent",
    "ChatChunk", "ChatContent", "ChatContext", "ChatItem", "ChatMessage", "ChoiceDelta",
    "FallbackAdapter",
    "ChatRole", "CompletionUsage", "FunctionCall", "FunctionCallOutput", "FunctionTool",
    "FunctionToolCall", "GenerationCreatedEvent", "ImageContent", "InputSpeechStartedEvent",
    "InputSpeechStoppedEvent", "InputTranscriptionCompleted", "Instructions", "LLM", "LLMStream",
    "MessageGeneration", "ProviderTool", "RealtimeCapabilities", "RealtimeError", "RealtimeModel",
    "RawFunctionTool", "RealtimeSession", "StopResponse", "ToolChoice", "ToolError", "ToolFlag",
    "ToolResult", "Toolset", "function_tool",
]


def __getattr__(name: str) -> object:
    """``mcp`` (LiveKit's ``llm.mcp``: MCP servers as tool sources) is imported on first use."""
    if name == "mcp":
        import importlib
        return importlib.import_module("..mcp", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
