"""``agents_trio.voice``: LiveKit's ``livekit.agents.voice`` names, on this runtime's objects:
the agent, the session, tasks, the tool context, speech handles and the session events."""

from __future__ import annotations

from ..agent import Agent
from ..agent_task import AgentTask
from ..events import (AgentFalseInterruptionEvent, AgentStateChangedEvent, CloseEvent,
                     CloseReason, ConversationItemAddedEvent, ErrorEvent,
                     FunctionToolsExecutedEvent, MetricsCollectedEvent, SpeechCreatedEvent,
                     ToolCallEnded, ToolCallStarted, ToolCallUpdated, ToolExecutionUpdatedEvent,
                     ToolReplyUpdated,
                     UserInputTranscribedEvent, UserStateChangedEvent,
                     UserTranscriptionTimeoutEvent, UserTurnExceededEvent)
from ..models import ModelSettings
from ..run_context import RunContext
from ..session import AgentSession
from ..speech_handle import SpeechHandle
from ..stt_context import KeytermDetectionOptions, KeytermsOptions, STTContextOptions
from ..usage import SessionUsageUpdatedEvent
from . import io, room_io

__all__ = [
    "io", "room_io",
    "KeytermDetectionOptions", "KeytermsOptions", "STTContextOptions",
    "Agent", "AgentFalseInterruptionEvent", "AgentSession", "AgentStateChangedEvent",
    "AgentTask", "CloseEvent", "CloseReason", "ConversationItemAddedEvent", "ErrorEvent",
    "FunctionToolsExecutedEvent", "MetricsCollectedEvent", "ModelSettings", "RunContext",
    "SessionUsageUpdatedEvent", "SpeechCreatedEvent", "SpeechHandle", "ToolCallEnded",
    "ToolCallStarted", "ToolCallUpdated", "ToolExecutionUpdatedEvent", "ToolReplyUpdated",
    "UserInputTranscribedEvent",
    "UserStateChangedEvent", "UserTranscriptionTimeoutEvent",
    "UserTurnExceededEvent",
]
