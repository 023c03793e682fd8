"""agents_trio: a voice-agent runtime on Trio's structured concurrency.

Dependencies point one way, each layer importing only the ones before it:
``chat``, ``models``, ``events``, ``options``, ``tools``, ``run_result``, ``speech_handle`` ←
``conversation`` (the state every activity shares) and ``agent`` ← ``hosts`` (the session as an
activity sees it) and ``agent_state`` ← the activity's helpers (``generation``,
``interruption``, ``preemptive``, ``user_turns``, ``realtime_link``, ``realtime_generation``),
each typed against a small protocol of what it needs ← ``activity`` ← ``agent_task`` and
``session`` ← ``workflows``. ``io`` depends on the model protocols and events, never on the
session. ``tests/test_layers.py`` holds the package to it.
"""

from ._errors import AgentsTrioError, APIError, SessionClosedError, StopResponse, ToolError
from .agent import Agent
from .agent_task import AgentTask
from .chat import (AgentConfigUpdate, AgentHandoff, ChatContext, ChatItem, ChatMessage,
                   FunctionCall, FunctionCallOutput)
from .events import (AgentFalseInterruptionEvent, AgentStateChangedEvent, CloseEvent, CloseOverrun,
                     ConversationItemAddedEvent, EOUMetrics, ErrorEvent,
                     FunctionToolsExecutedEvent, LLMMetrics, MetricsCollectedEvent,
                     PlaybackFinishedEvent, PlaybackStartedEvent, SpeechCreatedEvent,
                     STTMetrics, TTSMetrics, UserInputTranscribedEvent, UserStateChangedEvent,
                     VADMetrics)
from .models import (LLM, STT, TTS, VAD, ChatChunk, FlushSentinel, FunctionToolCall,
                     ModelSettings, SpeechData, SpeechEvent, SpeechEventType, VADEvent,
                     VADEventType)
from .io.audio import AudioOutputStalled
from .remote.wire import WireError
from .realtime import (GenerationCreatedEvent, InputSpeechStartedEvent, InputSpeechStoppedEvent,
                       InputTranscriptionCompleted, MessageGeneration, RealtimeCapabilities,
                       RealtimeError, RealtimeErrorEvent, RealtimeModel,
                       RealtimeResponseStalledError, RealtimeSession,
                       RealtimeSessionClosedError, SessionReconnectedEvent)
from .remote import (RemoteConnectionError, RemoteSession, RemoteSessionClosedError,
                     RemoteSessionError, SessionHost, SessionHostStatistics,
                     connect_remote_session, open_remote_session, open_session_host,
                     serve_session)
from .run_context import RunContext
from .run_result import RunResult
from .session import AgentSession
from .speech_handle import SpeechHandle
from .tools import FunctionTool, ToolFlag, function_tool
from .workflows import TaskCompletedEvent, TaskGroup, TaskGroupResult
from .models import TurnDetector

__all__ = [
    "APIError", "Agent", "AgentTask", "AgentConfigUpdate", "AgentFalseInterruptionEvent", "AgentHandoff",
    "AgentSession", "AgentStateChangedEvent", "AgentsTrioError", "ChatChunk", "ChatContext",
    "ChatItem", "ChatMessage", "CloseEvent", "CloseOverrun", "ConversationItemAddedEvent", "EOUMetrics",
    "ErrorEvent", "FlushSentinel", "FunctionCall", "FunctionCallOutput", "FunctionTool",
    "FunctionToolCall", "FunctionToolsExecutedEvent", "LLM", "LLMMetrics",
    "MetricsCollectedEvent", "ModelSettings", "PlaybackFinishedEvent", "PlaybackStartedEvent",
    "RealtimeCapabilities", "RealtimeError", "RealtimeErrorEvent", "RealtimeModel",
    "RealtimeResponseStalledError", "RealtimeSession", "RealtimeSessionClosedError",
    "GenerationCreatedEvent",
    "InputSpeechStartedEvent", "InputSpeechStoppedEvent", "InputTranscriptionCompleted",
    "MessageGeneration", "SessionReconnectedEvent", "RunContext", "RunResult", "STT", "STTMetrics", "SessionClosedError", "SpeechCreatedEvent",
    "SpeechData", "SpeechEvent", "SpeechEventType", "SpeechHandle", "StopResponse", "TTS",
    "TaskCompletedEvent", "TaskGroup", "TaskGroupResult",
    "TTSMetrics", "ToolError", "ToolFlag", "UserInputTranscribedEvent", "UserStateChangedEvent",
    "VAD", "VADEvent", "VADEventType", "VADMetrics", "function_tool",
    "RemoteConnectionError", "RemoteSession", "RemoteSessionClosedError", "RemoteSessionError",
    "SessionHost", "SessionHostStatistics", "WireError", "connect_remote_session",
    "open_remote_session", "open_session_host", "serve_session",
]
# faults and option checks (issue 15)
__all__ += ["AudioOutputStalled", "TurnDetector"]
# the objects and types of the core's seams (issue 10)
from .agent import NotGiven, SessionView  # noqa: E402
from .conversation import Conversation  # noqa: E402
from .run_result import RunHold  # noqa: E402

__all__ += ["Conversation", "NotGiven", "RunHold", "SessionView"]

# LiveKit rooms through the asyncio bridge. Importing these is cheap and changes nothing in
# asyncio: trio_asyncio is imported only when a bridge opens (see agents_trio/io/bridge.py).
# Plugin adapters live in agents_trio.plugins, worker mode in agents_trio.worker (both need
# livekit-agents).
from .io.bridge import AsyncioBridge, BridgeError, BridgeStatistics, open_bridge  # noqa: E402
from .io.room import (RoomConnectError, RoomDisconnectedError, RoomIO, RoomOptions,  # noqa: E402
                      RoomTranscriptionOutput, TextInputEvent, TextInputStatistics, mint_token,
                      open_room, open_room_io)
from .io.room_audio import RoomAudioInput, RoomAudioOutput, open_room_audio_output  # noqa: E402
from .job import JobContext, run_job  # noqa: E402

__all__ += ["AsyncioBridge", "BridgeError", "BridgeStatistics", "JobContext", "RoomAudioInput",
            "RoomAudioOutput", "RoomConnectError", "RoomDisconnectedError", "RoomIO",
            "RoomOptions", "RoomTranscriptionOutput", "TextInputEvent", "TextInputStatistics",
            "mint_token", "open_bridge",
            "open_room", "open_room_audio_output", "open_room_io", "run_job"]

# LiveKit's names and namespaces (issue 14): `livekit.agents.X` is `agents_trio.X`; the map and
# the names that are absent or differ are in docs/livekit-names.md
from ._errors import APIConnectionError, APIStatusError, APITimeoutError  # noqa: E402
from .agent import NOT_GIVEN, NotGivenOr  # noqa: E402
from .chat import ChatRole  # noqa: E402
from .events import CloseReason  # noqa: E402
from .job import get_job_context  # noqa: E402
from .options import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions  # noqa: E402
from .run_events import (AgentHandoffEvent, ChatMessageEvent, FunctionCallEvent,  # noqa: E402
                         FunctionCallOutputEvent)
import typing as _typing  # noqa: E402

if _typing.TYPE_CHECKING:  # loaded on first use, so importing agents_trio does not load the test DSL
    from .testing.expect import EventAssert, RunAssert
from .turn_options import (EndpointingOptions, InterruptionOptions,  # noqa: E402
                           PreemptiveGenerationOptions, TurnHandlingOptions,
                           UserTurnLimitOptions)
from . import beta, llm, metrics, room_io, stt, text_transforms, tts, vad, voice  # noqa: E402

__all__ += ["APIConnectOptions", "APIConnectionError", "APIStatusError", "APITimeoutError",
            "AgentHandoffEvent", "ChatMessageEvent", "ChatRole", "CloseReason",
            "DEFAULT_API_CONNECT_OPTIONS", "EndpointingOptions", "EventAssert",
            "FunctionCallEvent", "FunctionCallOutputEvent", "InterruptionOptions", "NOT_GIVEN",
            "NotGivenOr",
            "PreemptiveGenerationOptions", "RunAssert", "TurnHandlingOptions",
            "UserTurnLimitOptions", "beta", "get_job_context", "llm", "metrics", "room_io", "stt",
            "text_transforms", "tts", "vad", "voice"]


def __getattr__(name: str) -> object:
    """``RunAssert`` and ``EventAssert`` (LiveKit has them at the top level) come from
    ``agents_trio.testing.expect``, imported when first asked for."""
    if name in ("RunAssert", "EventAssert"):
        from .testing import expect
        return getattr(expect, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
