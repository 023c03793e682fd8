"""What the remote-session messages carry: chat items, agent and session snapshots, events.

The chat-item Structs mirror ``agents_trio.chat`` field for field (a test keeps them in step),
tagged by ``type`` like the chat items themselves, so ``to_wire_item``/``from_wire_item`` are
lossless for text content. Session events travel as the Structs of :data:`WireEvent`: plain
fields only — an error becomes its message and type name, a speech handle its id, a model its
class name. An event this module does not know yet travels as :class:`OtherEvent`.
"""

from __future__ import annotations

from typing import Any, Literal, overload

import msgspec

from ..chat import (AgentConfigUpdate, AgentHandoff, ChatItem, ChatMessage, FunctionCall,
                    FunctionCallOutput)

# --------------------------------------------------------------------------------------------
# Chat items


class _WireItem(msgspec.Struct, tag_field="type", kw_only=True):
    id: str
    created_at: float = 0.0


class MessageItem(_WireItem, tag="message", kw_only=True):
    role: Literal["system", "developer", "user", "assistant"]
    content: list[str] = msgspec.field(default_factory=list)
    interrupted: bool = False
    transcript_confidence: float | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    metrics: dict[str, Any] = msgspec.field(default_factory=dict)
    hash: bytes | None = None


class FunctionCallItem(_WireItem, tag="function_call", kw_only=True):
    call_id: str
    name: str
    arguments: str = "{}"
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    group_id: str | None = None


class FunctionCallOutputItem(_WireItem, tag="function_call_output", kw_only=True):
    call_id: str
    name: str
    output: str
    is_error: bool = False
    reply_required: bool = True


class AgentHandoffItem(_WireItem, tag="agent_handoff", kw_only=True):
    new_agent_id: str
    old_agent_id: str | None = None


class AgentConfigUpdateItem(_WireItem, tag="agent_config_update", kw_only=True):
    instructions: str | None = None
    tools_added: list[str] | None = None
    tools_removed: list[str] | None = None


WireItem = (MessageItem | FunctionCallItem | FunctionCallOutputItem | AgentHandoffItem |
            AgentConfigUpdateItem)

ITEM_PAIRS: dict[str, tuple[type[Any], type[Any]]] = {
    "message": (ChatMessage, MessageItem),
    "function_call": (FunctionCall, FunctionCallItem),
    "function_call_output": (FunctionCallOutput, FunctionCallOutputItem),
    "agent_handoff": (AgentHandoff, AgentHandoffItem),
    "agent_config_update": (AgentConfigUpdate, AgentConfigUpdateItem),
}


@overload
def to_wire_item(item: FunctionCall) -> FunctionCallItem: ...


@overload
def to_wire_item(item: FunctionCallOutput) -> FunctionCallOutputItem: ...


@overload
def to_wire_item(item: ChatItem) -> WireItem: ...


def to_wire_item(item: ChatItem) -> WireItem:
    """The wire form of a chat item (fields the wire does not know are left out)."""
    _, wire_cls = ITEM_PAIRS[item.type]
    fields = {name: getattr(item, name) for name in wire_cls.__struct_fields__
              if hasattr(item, name)}
    if isinstance(item, ChatMessage):
        fields["content"] = [c for c in item.content if isinstance(c, str)]  # text parts only
    return wire_cls(**fields)  # type: ignore[no-any-return]


def from_wire_item(item: WireItem) -> ChatItem:
    """The chat item a wire item stands for."""
    chat_cls, _ = ITEM_PAIRS[item.__struct_config__.tag]  # type: ignore[index]
    fields = {name: getattr(item, name) for name in item.__struct_fields__
              if name in chat_cls.__struct_fields__}
    return chat_cls(**fields)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# Snapshots


class ToolInfo(msgspec.Struct, kw_only=True):
    """A tool as the LLM sees it: name, description, JSON schema of the arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class AgentInfo(msgspec.Struct, kw_only=True):
    """The current agent: its id, class name, instructions and tools (session tools too)."""

    id: str
    label: str
    instructions: str
    tools: list[ToolInfo] = msgspec.field(default_factory=list)


class SpeechInfo(msgspec.Struct, kw_only=True):
    """The speech playing or being generated."""

    id: str
    source: str
    allow_interruptions: bool
    interrupted: bool
    done: bool


class SessionStateInfo(msgspec.Struct, kw_only=True):
    """A snapshot of the session. ``time`` is the host's Trio time."""

    agent_state: str
    user_state: str
    agent_id: str | None = None
    current_speech: SpeechInfo | None = None
    ready: bool = False
    time: float = 0.0


# --------------------------------------------------------------------------------------------
# Events


class _WireEvent(msgspec.Struct, tag_field="type", kw_only=True):
    created_at: float = 0.0

    @property
    def name(self) -> str:
        """The session event name (``session.on(name, ...)``)."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class AgentStateChanged(_WireEvent, tag="agent_state_changed", kw_only=True):
    old_state: str
    new_state: str


class UserStateChanged(_WireEvent, tag="user_state_changed", kw_only=True):
    old_state: str
    new_state: str


class UserInputTranscribed(_WireEvent, tag="user_input_transcribed", kw_only=True):
    transcript: str
    is_final: bool
    language: str | None = None
    speaker_id: str | None = None


class ConversationItemAdded(_WireEvent, tag="conversation_item_added", kw_only=True):
    item: WireItem


class FunctionToolsExecuted(_WireEvent, tag="function_tools_executed", kw_only=True):
    function_calls: list[FunctionCallItem] = msgspec.field(default_factory=list)
    function_call_outputs: list[FunctionCallOutputItem | None] = msgspec.field(
        default_factory=list)


class MetricsCollected(_WireEvent, tag="metrics_collected", kw_only=True):
    metrics: dict[str, Any] = msgspec.field(default_factory=dict)


class SessionUsageUpdated(_WireEvent, tag="session_usage_updated", kw_only=True):
    """The session's usage: one dict per model (``LLMModelUsage`` and the others' fields)."""

    model_usage: list[dict[str, Any]] = msgspec.field(default_factory=list)


class SpeechCreated(_WireEvent, tag="speech_created", kw_only=True):
    speech_id: str
    source: str
    user_initiated: bool = True


class AgentFalseInterruption(_WireEvent, tag="agent_false_interruption", kw_only=True):
    resumed: bool


class ErrorOccurred(_WireEvent, tag="error", kw_only=True):
    message: str
    error_type: str
    source: str | None = None
    recoverable: bool = False


class SessionClosed(_WireEvent, tag="close", kw_only=True):
    reason: str
    error: str | None = None


class OtherEvent(_WireEvent, tag="other", kw_only=True):
    """An event this protocol version has no Struct for; ``data`` holds its fields."""

    event_name: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.event_name


WireEvent = (AgentStateChanged | UserStateChanged | UserInputTranscribed | ConversationItemAdded |
             FunctionToolsExecuted | MetricsCollected | SessionUsageUpdated | SpeechCreated |
             AgentFalseInterruption | ErrorOccurred | SessionClosed | OtherEvent)


FORWARDED_EVENTS: tuple[str, ...] = tuple(
    t.__struct_config__.tag for t in WireEvent.__args__ if t is not OtherEvent)
"""The session event names with a Struct of their own."""


def _describe(obj: object) -> str | None:
    return None if obj is None else type(obj).__name__


def _plain(obj: object) -> str:
    return repr(obj)[:200]


def event_to_wire(event: object) -> WireEvent:
    """The wire form of a session event (any object with ``type`` and ``created_at``)."""
    return _event_to_wire(event)


def _event_to_wire(event: Any) -> WireEvent:  # noqa: ANN401 - dispatched on ``event.type``
    name = getattr(event, "type", type(event).__name__)
    at = float(getattr(event, "created_at", 0.0))
    if name in ("agent_state_changed", "user_state_changed"):
        cls = AgentStateChanged if name == "agent_state_changed" else UserStateChanged
        return cls(created_at=at, old_state=event.old_state, new_state=event.new_state)
    if name == "user_input_transcribed":
        return UserInputTranscribed(created_at=at, transcript=event.transcript,
                                    is_final=event.is_final, language=event.language,
                                    speaker_id=event.speaker_id)
    if name == "conversation_item_added":
        return ConversationItemAdded(created_at=at, item=to_wire_item(event.item))
    if name == "function_tools_executed":
        return FunctionToolsExecuted(
            created_at=at, function_calls=[to_wire_item(c) for c in event.function_calls],
            function_call_outputs=[None if o is None else to_wire_item(o)
                                   for o in event.function_call_outputs])
    if name == "metrics_collected":
        return MetricsCollected(created_at=at,
                                metrics=msgspec.to_builtins(event.metrics, enc_hook=_plain))
    if name == "session_usage_updated":
        return SessionUsageUpdated(created_at=at, model_usage=[
            msgspec.to_builtins(u) for u in event.usage.model_usage])
    if name == "speech_created":
        handle = event.speech_handle
        return SpeechCreated(created_at=at, speech_id=str(getattr(handle, "id", handle)),
                             source=event.source, user_initiated=event.user_initiated)
    if name == "agent_false_interruption":
        return AgentFalseInterruption(created_at=at, resumed=event.resumed)
    if name == "error":
        error = event.error
        return ErrorOccurred(created_at=at, message=str(error), error_type=type(error).__name__,
                             source=_describe(event.source),
                             recoverable=bool(getattr(error, "recoverable", False)))
    if name == "close":
        return SessionClosed(created_at=at, reason=event.reason,
                             error=None if event.error is None else str(event.error))
    data = msgspec.to_builtins(event, enc_hook=_plain)
    if not isinstance(data, dict):
        data = {"value": data}
    data.pop("type", None)
    data.pop("created_at", None)
    return OtherEvent(created_at=at, event_name=str(name), data=data)
