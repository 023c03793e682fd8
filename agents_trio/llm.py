"""``agents_trio.llm``: LiveKit's ``livekit.agents.llm`` names, on this runtime's objects.

The chat context and its items, function tools, and the model protocols a model author
implements (``LLM``, ``RealtimeModel``: Trio-native here; a LiveKit plugin object goes through
``agents_trio.plugins.adapt()``). Names of ``livekit.agents.llm`` absent here are listed in
docs/livekit-names.md.
"""

from __future__ import annotations

from ._errors import StopResponse, ToolError
from .fallback.llm import AvailabilityChangedEvent, FallbackAdapter
from .chat import (AgentConfigUpdate, AgentHandoff, ChatContext, ChatItem, ChatMessage,
                   ChatRole, FunctionCall, FunctionCallOutput)
from .models import LLM, ChatChunk, CompletionUsage, FunctionToolCall, LLMStream, ToolChoice
from .realtime import (GenerationCreatedEvent, InputSpeechStartedEvent, InputSpeechStoppedEvent,
                       InputTranscriptionCompleted, MessageGeneration, RealtimeCapabilities,
                       RealtimeError, RealtimeModel, RealtimeSession)
from .tools import FunctionTool, ToolFlag, function_tool

__all__ = [
    "AgentConfigUpdate", "AgentHandoff", "AvailabilityChangedEvent", "FallbackAdapter", "ChatChunk", "ChatContext", "ChatItem", "ChatMessage",
    "ChatRole", "CompletionUsage", "FunctionCall", "FunctionCallOutput", "FunctionTool",
    "FunctionToolCall", "GenerationCreatedEvent", "InputSpeechStartedEvent",
    "InputSpeechStoppedEvent", "InputTranscriptionCompleted", "LLM", "LLMStream",
    "MessageGeneration", "RealtimeCapabilities", "RealtimeError", "RealtimeModel",
    "RealtimeSession", "StopResponse", "ToolChoice", "ToolError", "ToolFlag", "function_tool",
]
