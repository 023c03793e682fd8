"""agents_trio: a voice-agent runtime on Trio's structured concurrency.

``livekit.agents.X`` is ``agents_trio.X`` for the names an agent author uses
(docs/livekit-names.md). The package's layers, who owns what, and its import graph are in
docs/architecture.md; ``tests/test_layers.py`` holds the modules to them. Importing the package
does not import asyncio's side: trio_asyncio is loaded when a bridge opens, and LiveKit's
plugins (``agents_trio.plugins``) and worker (``agents_trio.worker``) need livekit-agents.
"""

from __future__ import annotations

import typing as _typing

from ._errors import (AgentsTrioError, APIConnectionError, APIError, APIStatusError,
                      APITimeoutError, SessionClosedError, StopResponse, ToolError)
from .agent import Agent, NOT_GIVEN, NotGiven, NotGivenOr, SessionView
from .agent_task import AgentTask
from .background_audio import AudioConfig, BackgroundAudioPlayer, BuiltinAudioClip, PlayHandle
from .collector import tune_collector_for_sessions
from .chat import (AgentConfigUpdate, AgentHandoff, ChatContent, ChatContext, ChatItem,
                   ChatMessage, ChatRole, FunctionCall, FunctionCallOutput)
from .conversation import Conversation
from .usage import SessionUsageUpdatedEvent
from .events import (AgentFalseInterruptionEvent, AgentStateChangedEvent, CloseEvent, CloseOverrun,
                     CloseReason, ConversationItemAddedEvent, EOUMetrics, ErrorEvent,
                     FunctionToolsExecutedEvent, LLMMetrics, MetricsCollectedEvent,
                     PlaybackFinishedEvent, PlaybackStartedEvent, SpeechCreatedEvent, STTMetrics,
                     ToolCallEnded, ToolCallStarted, ToolCallUpdated, ToolExecutionUpdatedEvent,
                     ToolReplyUpdated, TTSMetrics, UserInputTranscribedEvent,
                     UserStateChangedEvent, UserTranscriptionTimeoutEvent, UserTurnExceededEvent,
                     VADMetrics)
from .io.audio import AudioOutputStalled
from .io.bridge import AsyncioBridge, BridgeError, BridgeStatistics, open_bridge
from .io.room import (mint_token, open_room, open_room_io, RoomConnectError, RoomDisconnectedError,
                      RoomIO, RoomOptions, RoomTranscriptionOutput, TextInputEvent,
                      TextInputStatistics)
from .io.room_audio import open_room_audio_output, RoomAudioInput, RoomAudioOutput
from .io.room_options import RoomInputOptions, RoomOutputOptions
from .job import AutoSubscribe, get_job_context, JobContext, run_job
from .job_process import JobProcess
from .server import AgentServer
from .worker_options import WorkerOptions
from .models import (ChatChunk, FlushSentinel, FunctionToolCall, LLM, ModelSettings, SpeechData,
                     SpeechEvent, SpeechEventType, STT, TTS, TurnDetector, VAD, VADEvent,
                     VADEventType)
from .options import APIConnectOptions, DEFAULT_API_CONNECT_OPTIONS
from .realtime import (GenerationCreatedEvent, InputSpeechStartedEvent, InputSpeechStoppedEvent,
                       InputTranscriptionCompleted, MessageGeneration, RealtimeCapabilities,
                       RealtimeError, RealtimeErrorEvent, RealtimeModel,
                       RealtimeResponseStalledError, RealtimeSession, RealtimeSessionClosedError,
                       SessionReconnectedEvent)
from .remote import (connect_remote_session, open_remote_session, open_session_host,
                     RemoteConnectionError, RemoteSession, RemoteSessionClosedError,
                     RemoteSessionError, serve_session, SessionHost, SessionHostStatistics)
from .remote.wire import WireError
from .run_context import RunContext
from .run_events import (AgentHandoffEvent, ChatMessageEvent, FunctionCallEvent,
                         FunctionCallOutputEvent)
from .run_result import RunHold, RunResult
from .session import AgentSession
from .speech_handle import SpeechHandle
from .stt_context import KeytermDetectionOptions, KeytermsOptions, STTContextOptions
from .tools import function_tool, FunctionTool, ToolFlag
from .tool_mocks import mock_tools
from .turn_options import (EndpointingOptions, InterruptionOptions, PreemptiveGenerationOptions,
                           TurnHandlingOptions, UserTurnLimitOptions)
from .workflows import TaskCompletedEvent, TaskGroup, TaskGroupResult
from . import beta, cli, llm, metrics, room_io, stt, text_transforms, tokenize, tts, utils, vad, voice

__all__ = [
    "tune_collector_for_sessions",
    "KeytermDetectionOptions", "KeytermsOptions", "STTContextOptions",
    "AudioConfig", "BackgroundAudioPlayer", "BuiltinAudioClip", "PlayHandle",
    "Agent", "AgentConfigUpdate", "AgentFalseInterruptionEvent", "AgentHandoff",
    "AgentHandoffEvent", "AgentServer", "AgentSession", "AgentStateChangedEvent", "AgentsTrioError", "AgentTask",
    "APIConnectionError", "APIConnectOptions", "APIError", "APIStatusError", "APITimeoutError",
    "AsyncioBridge", "AudioOutputStalled", "AutoSubscribe", "beta", "BridgeError", "BridgeStatistics", "ChatChunk",
    "ChatContent", "ChatContext", "ChatItem", "ChatMessage", "ChatMessageEvent", "ChatRole", "cli",
    "CloseEvent",
    "CloseOverrun", "CloseReason", "connect_remote_session", "Conversation",
    "ConversationItemAddedEvent", "DEFAULT_API_CONNECT_OPTIONS", "EndpointingOptions", "EOUMetrics",
    "ErrorEvent", "EventAssert", "FlushSentinel", "function_tool", "FunctionCall",
    "FunctionCallEvent", "FunctionCallOutput", "FunctionCallOutputEvent", "FunctionTool",
    "FunctionToolCall", "FunctionToolsExecutedEvent", "GenerationCreatedEvent", "get_job_context",
    "InputSpeechStartedEvent", "InputSpeechStoppedEvent", "InputTranscriptionCompleted",
    "InterruptionOptions", "JobContext", "JobProcess", "LLM", "llm", "LLMMetrics", "MessageGeneration", "metrics",
    "MetricsCollectedEvent", "mint_token", "mock_tools", "ModelSettings", "NOT_GIVEN", "NotGiven", "NotGivenOr",
    "open_bridge", "open_remote_session", "open_room", "open_room_audio_output", "open_room_io",
    "open_session_host", "PlaybackFinishedEvent", "PlaybackStartedEvent",
    "PreemptiveGenerationOptions", "RealtimeCapabilities", "RealtimeError", "RealtimeErrorEvent",
    "RealtimeModel", "RealtimeResponseStalledError", "RealtimeSession",
    "RealtimeSessionClosedError", "RemoteConnectionError", "RemoteSession",
    "RemoteSessionClosedError", "RemoteSessionError", "room_io", "RoomAudioInput",
    "RoomAudioOutput", "RoomConnectError", "RoomDisconnectedError", "RoomInputOptions", "RoomIO",
    "RoomOptions", "RoomOutputOptions",
    "RoomTranscriptionOutput", "run_job", "RunAssert", "RunContext", "RunHold", "RunResult",
    "serve_session", "SessionClosedError", "SessionHost", "SessionHostStatistics",
    "SessionReconnectedEvent", "SessionUsageUpdatedEvent", "SessionView", "SpeechCreatedEvent", "SpeechData", "SpeechEvent",
    "SpeechEventType", "SpeechHandle", "StopResponse", "ToolCallEnded", "ToolCallStarted",
    "ToolCallUpdated", "ToolExecutionUpdatedEvent", "ToolReplyUpdated", "STT", "stt", "STTMetrics",
    "TaskCompletedEvent", "TaskGroup", "TaskGroupResult", "text_transforms", "TextInputEvent",
    "tokenize",
    "TextInputStatistics", "ToolError", "ToolFlag", "TTS", "tts", "TTSMetrics", "TurnDetector",
    "TurnHandlingOptions", "UserInputTranscribedEvent", "UserStateChangedEvent",
    "UserTranscriptionTimeoutEvent", "UserTurnExceededEvent", "UserTurnLimitOptions", "utils", "VAD", "vad", "VADEvent", "VADEventType", "VADMetrics", "voice",
    "WireError", "WorkerOptions",
]


if _typing.TYPE_CHECKING:  # loaded on first use: importing agents_trio does not load the test DSL
    from .testing.expect import EventAssert, RunAssert
    from livekit.agents import JobRequest as JobRequest


def __getattr__(name: str) -> object:
    """``RunAssert`` and ``EventAssert`` (LiveKit has them at the top level) come from
    ``agents_trio.testing.expect``, ``JobRequest`` is LiveKit's (what an ``on_request`` hook
    receives, in LiveKit's worker: it needs livekit-agents), and ``inference`` (LiveKit's gateway models, which need
    livekit-agents) is imported, when first asked for."""
    if name == "JobRequest":   # what an on_request hook receives: LiveKit's own
        from livekit.agents import JobRequest
        return JobRequest
    if name in ("RunAssert", "EventAssert"):
        from .testing import expect
        return getattr(expect, name)
    if name == "inference":
        import importlib
        return importlib.import_module(".inference", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
