"""Session events and metrics, as msgspec Structs.

Every event has a ``type`` (its name for ``session.on``) and ``created_at`` (Trio time at
emission, except user-state events, which are back-dated to when speech started or ended).
"""

from __future__ import annotations

import enum
from typing import Any, Literal, Union

import msgspec

from ._ids import now
from .chat import ChatMessage, AgentHandoff, FunctionCall, FunctionCallOutput

AgentState = Literal["initializing", "idle", "listening", "thinking", "speaking"]
UserState = Literal["listening", "speaking", "away"]
SpeechSource = Literal["say", "generate_reply", "tool_response"]


class CloseReason(str, enum.Enum):
    """Why a session closed (LiveKit's ``CloseReason``: same members, same values). A str
    enum: ``reason == "error"`` holds, and ``str(reason)`` is the value."""

    ERROR = "error"
    JOB_SHUTDOWN = "job_shutdown"
    PARTICIPANT_DISCONNECTED = "participant_disconnected"
    USER_INITIATED = "user_initiated"
    TASK_COMPLETED = "task_completed"

    def __str__(self) -> str:
        return self.value

    def __format__(self, format_spec: str) -> str:
        return self.value.__format__(format_spec)


class _Event(msgspec.Struct, kw_only=True):
    created_at: float = msgspec.field(default_factory=now)


class AgentStateChangedEvent(_Event):
    old_state: AgentState
    new_state: AgentState
    type: Literal["agent_state_changed"] = "agent_state_changed"


class UserStateChangedEvent(_Event):
    old_state: UserState
    new_state: UserState
    type: Literal["user_state_changed"] = "user_state_changed"


class UserInputTranscribedEvent(_Event):
    transcript: str
    is_final: bool
    item_id: str | None = None
    speaker_id: str | None = None
    language: str | None = None
    type: Literal["user_input_transcribed"] = "user_input_transcribed"


class UserTranscriptionTimeoutEvent(_Event):
    """Speech the VAD heard got no transcript within ``transcription_timeout`` of its end
    (the STT failed, or did not hear it): ``speech_duration`` is the turn's untranscribed
    speech, ``vad_speech_started_at`` when it began."""

    speech_duration: float
    vad_speech_started_at: float
    type: Literal["user_transcription_timeout"] = "user_transcription_timeout"


class UserTurnExceededEvent(_Event):
    """The user spoke past ``turn_handling["user_turn_limit"]`` without the agent answering
    (handed to ``Agent.on_user_turn_exceeded``): ``transcript`` is the open turn's,
    ``accumulated_*`` count since the agent last spoke, ``duration`` since the user began."""

    transcript: str
    accumulated_transcript: str
    accumulated_word_count: int
    duration: float
    type: Literal["user_turn_exceeded"] = "user_turn_exceeded"


class ConversationItemAddedEvent(_Event):
    item: Union[ChatMessage, AgentHandoff]
    type: Literal["conversation_item_added"] = "conversation_item_added"


class FunctionToolsExecutedEvent(_Event):
    """All tools of one LLM step finished. Listeners may cancel the reply or the handoff."""

    function_calls: list[FunctionCall]
    function_call_outputs: list[FunctionCallOutput | None]
    has_agent_handoff: bool = False
    type: Literal["function_tools_executed"] = "function_tools_executed"

    def zipped(self) -> list[tuple[FunctionCall, FunctionCallOutput | None]]:
        return list(zip(self.function_calls, self.function_call_outputs))

    @property
    def has_tool_reply(self) -> bool:
        """The LLM answers the outputs: one of them requires a reply."""
        return any(o.reply_required for o in self.function_call_outputs if o is not None)

    def cancel_tool_reply(self) -> None:
        """No reply to this step: every output stops requiring one."""
        for output in self.function_call_outputs:
            if output is not None:
                output.reply_required = False

    def cancel_agent_handoff(self) -> None:
        self.has_agent_handoff = False


class ToolCallStarted(msgspec.Struct, kw_only=True, tag_field="type",
                      tag="tool_call_started"):
    """A function call started running (a refused duplicate or an unknown tool never does)."""

    function_call: FunctionCall

    @property
    def type(self) -> Literal["tool_call_started"]:
        return "tool_call_started"


class ToolCallUpdated(msgspec.Struct, kw_only=True, tag_field="type",
                      tag="tool_call_updated"):
    """A progress update a running call reported (``RunContext.update``): ``id`` is the
    entry's call id (``call_id`` for the first, ``{call_id}_update_N`` after it)."""

    id: str
    call_id: str
    message: str
    silent: bool = False

    @property
    def type(self) -> Literal["tool_call_updated"]:
        return "tool_call_updated"


class ToolCallEnded(msgspec.Struct, kw_only=True, tag_field="type", tag="tool_call_ended"):
    """A call's one terminal report: ``done``, ``error`` (``message`` is the error) or
    ``cancelled``; ``message`` is the result text, None when there is nothing to say."""

    id: str
    call_id: str
    status: Literal["done", "error", "cancelled"]
    message: str | None = None

    @property
    def type(self) -> Literal["tool_call_ended"]:
        return "tool_call_ended"


class ToolReplyUpdated(msgspec.Struct, kw_only=True, tag_field="type",
                       tag="tool_reply_updated"):
    """The reply that voices background tool results: ``scheduled``, then ``completed``,
    ``interrupted`` or ``skipped`` (it said nothing)."""

    update_ids: list[str]
    status: Literal["scheduled", "completed", "interrupted", "skipped"]
    speech_id: str

    @property
    def type(self) -> Literal["tool_reply_updated"]:
        return "tool_reply_updated"


ToolExecutionUpdate = Union[ToolCallStarted, ToolCallUpdated, ToolCallEnded, ToolReplyUpdated]


class ToolExecutionUpdatedEvent(_Event):
    """One step of a tool call's life; tell the kinds apart by ``update.type``."""

    update: ToolExecutionUpdate
    type: Literal["tool_execution_updated"] = "tool_execution_updated"


class Metadata(msgspec.Struct, kw_only=True):
    """Which model produced a metrics record (LiveKit's ``metrics.base.Metadata``)."""

    model_name: str | None = None
    model_provider: str | None = None


class _Metrics(msgspec.Struct, kw_only=True):
    timestamp: float = msgspec.field(default_factory=now)
    speech_id: str | None = None
    metadata: Metadata | None = None


class EOUMetrics(_Metrics):
    end_of_utterance_delay: float = 0.0
    transcription_delay: float = 0.0
    on_user_turn_completed_delay: float = 0.0
    type: Literal["eou_metrics"] = "eou_metrics"


class LLMMetrics(_Metrics):
    label: str = ""
    request_id: str = ""
    ttft: float = 0.0
    duration: float = 0.0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    prompt_cached_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0  # part of completion_tokens, not in addition to them
    total_tokens: int = 0
    tokens_per_second: float = 0.0
    cancelled: bool = False
    type: Literal["llm_metrics"] = "llm_metrics"


class TTSMetrics(_Metrics):
    label: str = ""
    request_id: str = ""
    segment_id: str | None = None
    ttfb: float = 0.0
    duration: float = 0.0
    audio_duration: float = 0.0
    characters_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    streamed: bool = False
    acquire_time: float = 0.0
    connection_reused: bool = False
    cancelled: bool = False
    type: Literal["tts_metrics"] = "tts_metrics"


class STTMetrics(_Metrics):
    label: str = ""
    request_id: str = ""
    duration: float = 0.0
    audio_duration: float = 0.0
    streamed: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int | None = None  # None: input_tokens + output_tokens, as LiveKit
    input_audio_tokens: int = 0
    acquire_time: float = 0.0
    connection_reused: bool = False
    type: Literal["stt_metrics"] = "stt_metrics"

    def __post_init__(self) -> None:
        if self.total_tokens is None:
            self.total_tokens = self.input_tokens + self.output_tokens


class VADMetrics(_Metrics):
    label: str = ""
    idle_time: float = 0.0
    inference_count: int = 0
    inference_duration_total: float = 0.0
    type: Literal["vad_metrics"] = "vad_metrics"


class RealtimeCachedTokenDetails(msgspec.Struct, kw_only=True):
    """Cached input tokens by modality (``RealtimeModelMetrics.CachedTokenDetails``)."""

    audio_tokens: int = 0
    text_tokens: int = 0
    image_tokens: int = 0


class RealtimeInputTokenDetails(msgspec.Struct, kw_only=True):
    """Input tokens by modality (``RealtimeModelMetrics.InputTokenDetails``)."""

    audio_tokens: int = 0
    text_tokens: int = 0
    image_tokens: int = 0
    cached_tokens: int = 0
    cached_tokens_details: RealtimeCachedTokenDetails | None = None


class RealtimeOutputTokenDetails(msgspec.Struct, kw_only=True):
    """Output tokens by modality (``RealtimeModelMetrics.OutputTokenDetails``)."""

    text_tokens: int = 0
    audio_tokens: int = 0
    image_tokens: int = 0


class RealtimeModelMetrics(_Metrics):
    """One realtime-model response, reported by its session when the response is done
    (``timestamp``: its creation; ``duration``: creation to done; ``ttft``: to the first
    audio, -1 if none; token counts as the server billed them). A session reporting its
    connection sends one with no tokens and ``acquire_time`` set. LiveKit's fields."""

    # LiveKit's nested names (left unannotated: ``type`` is a field of this class)
    CachedTokenDetails = RealtimeCachedTokenDetails
    InputTokenDetails = RealtimeInputTokenDetails
    OutputTokenDetails = RealtimeOutputTokenDetails

    label: str = ""
    request_id: str = ""
    duration: float = 0.0
    session_duration: float = 0.0
    ttft: float = -1.0
    cancelled: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    tokens_per_second: float = 0.0
    input_token_details: RealtimeInputTokenDetails = msgspec.field(
        default_factory=RealtimeInputTokenDetails)
    output_token_details: RealtimeOutputTokenDetails = msgspec.field(
        default_factory=RealtimeOutputTokenDetails)
    acquire_time: float = 0.0
    connection_reused: bool = False
    type: Literal["realtime_model_metrics"] = "realtime_model_metrics"


AgentMetrics = Union[EOUMetrics, LLMMetrics, TTSMetrics, STTMetrics, VADMetrics,
                     RealtimeModelMetrics]


class MetricsCollectedEvent(_Event):
    metrics: AgentMetrics
    type: Literal["metrics_collected"] = "metrics_collected"


class SpeechCreatedEvent(_Event):
    speech_handle: Any
    user_initiated: bool = True
    source: SpeechSource = "generate_reply"
    type: Literal["speech_created"] = "speech_created"


class AgentFalseInterruptionEvent(_Event):
    resumed: bool
    # deprecated in LiveKit (the agent resumes by itself now): always None here
    message: Any = None
    extra_instructions: str | None = None
    type: Literal["agent_false_interruption"] = "agent_false_interruption"


class ErrorEvent(_Event):
    error: Any
    source: Any = None
    type: Literal["error"] = "error"


class CloseOverrun(msgspec.Struct, kw_only=True):
    """A close that outlived its grace, held up by work shielded from cancellation.

    Attributes:
        grace_ended_at: When the grace ran out (Trio time).
        seconds: How long the close took beyond its grace.
        tools: The tool calls still running when the grace ran out.
    """

    grace_ended_at: float
    seconds: float = 0.0
    tools: list[str] = msgspec.field(default_factory=list)


class CloseEvent(_Event):
    reason: CloseReason
    error: Any = None
    #: set when the close outlived its grace (a tool shielded itself from cancellation)
    overrun: CloseOverrun | None = None
    type: Literal["close"] = "close"


class PlaybackStartedEvent(_Event):
    type: Literal["playback_started"] = "playback_started"


class PlaybackFinishedEvent(_Event):
    playback_position: float
    interrupted: bool
    synchronized_transcript: str | None = None
    type: Literal["playback_finished"] = "playback_finished"


SessionEvent = Union[AgentStateChangedEvent, UserStateChangedEvent, UserInputTranscribedEvent,
                     ConversationItemAddedEvent, FunctionToolsExecutedEvent,
                     MetricsCollectedEvent, SpeechCreatedEvent, AgentFalseInterruptionEvent,
                     ErrorEvent, CloseEvent, ToolExecutionUpdatedEvent]
