"""Wire events back into the session event classes, so remote listeners read like local ones.

What cannot cross the wire is replaced: an error becomes a ``RemoteSessionError`` with the
original message and type name, a speech handle its id, a model (an error's ``source``) its
class name. Times are the host's Trio times.
"""

from __future__ import annotations

from typing import Any, Union, cast

import msgspec

from ..events import AgentState, UserState
from ..events import (AgentFalseInterruptionEvent, AgentStateChangedEvent, CloseEvent,
                      ConversationItemAddedEvent, EOUMetrics, ErrorEvent,
                      FunctionToolsExecutedEvent, LLMMetrics, Metadata, MetricsCollectedEvent,
                      SpeechCreatedEvent, STTMetrics, TTSMetrics, UserInputTranscribedEvent,
                      UserStateChangedEvent, VADMetrics)
from ..usage import (AgentSessionUsage, LLMModelUsage, ModelUsage, SessionUsageUpdatedEvent,
                     STTModelUsage, TTSModelUsage)
from .wire_payloads import (AgentFalseInterruption, AgentStateChanged, ConversationItemAdded,
                            ErrorOccurred, FunctionToolsExecuted, MetricsCollected, SessionClosed,
                            SessionUsageUpdated, SpeechCreated, UserInputTranscribed,
                            UserStateChanged, WireEvent, from_wire_item)
from .errors import RemoteSessionError

Metrics = Union[EOUMetrics, LLMMetrics, TTSMetrics, STTMetrics, VADMetrics]

_METRICS: dict[str, type[Metrics]] = {cls().type: cls
            for cls in (EOUMetrics, LLMMetrics, TTSMetrics, STTMetrics, VADMetrics)}


def _metrics(data: dict[str, Any]) -> Metrics | dict[str, Any]:
    cls = _METRICS.get(data.get("type", ""))
    if cls is None:
        return data
    known = {k: v for k, v in data.items() if k in cls.__struct_fields__ and k != "type"}
    if isinstance(known.get("metadata"), dict):
        known["metadata"] = msgspec.convert(known["metadata"], Metadata)
    try:
        return cls(**known)
    except TypeError:
        return data


_USAGE: dict[str, type[ModelUsage]] = {"llm_usage": LLMModelUsage, "tts_usage": TTSModelUsage,
                                       "stt_usage": STTModelUsage}


def _usage(entries: list[dict[str, Any]]) -> AgentSessionUsage:
    """The usage entries of the kinds this side knows (others are left out)."""
    return AgentSessionUsage(model_usage=[
        msgspec.convert(e, _USAGE[e["type"]]) for e in entries if e.get("type") in _USAGE])


def event_from_wire(event: WireEvent) -> tuple[str, Any]:
    """``(name, event)``: the session event a wire event stands for."""
    at = event.created_at
    if isinstance(event, AgentStateChanged):
        return event.name, AgentStateChangedEvent(
            old_state=cast(AgentState, event.old_state),
            new_state=cast(AgentState, event.new_state), created_at=at)
    if isinstance(event, UserStateChanged):
        return event.name, UserStateChangedEvent(
            old_state=cast(UserState, event.old_state),
            new_state=cast(UserState, event.new_state), created_at=at)
    if isinstance(event, UserInputTranscribed):
        return event.name, UserInputTranscribedEvent(
            transcript=event.transcript, is_final=event.is_final, language=event.language,
            speaker_id=event.speaker_id, created_at=at)
    if isinstance(event, ConversationItemAdded):
        return event.name, ConversationItemAddedEvent(
            item=from_wire_item(event.item), created_at=at)  # type: ignore[arg-type]
    if isinstance(event, FunctionToolsExecuted):
        return event.name, FunctionToolsExecutedEvent(
            function_calls=[from_wire_item(c) for c in event.function_calls],  # type: ignore
            function_call_outputs=[None if o is None else from_wire_item(o)  # type: ignore
                                   for o in event.function_call_outputs], created_at=at)
    if isinstance(event, MetricsCollected):
        metrics = _metrics(event.metrics)  # a kind this side does not know stays a dict
        return event.name, MetricsCollectedEvent(metrics=metrics,  # type: ignore[arg-type]
                                                 created_at=at)
    if isinstance(event, SessionUsageUpdated):
        return event.name, SessionUsageUpdatedEvent(usage=_usage(event.model_usage),
                                                    created_at=at)
    if isinstance(event, SpeechCreated):
        return event.name, SpeechCreatedEvent(speech_handle=event.speech_id,
                                              user_initiated=event.user_initiated,
                                              source=event.source,  # type: ignore[arg-type]
                                              created_at=at)
    if isinstance(event, AgentFalseInterruption):
        return event.name, AgentFalseInterruptionEvent(resumed=event.resumed, created_at=at)
    if isinstance(event, ErrorOccurred):
        error = RemoteSessionError(event.message, code="session_error",
                                   error_type=event.error_type)
        return event.name, ErrorEvent(error=error, source=event.source, created_at=at)
    if isinstance(event, SessionClosed):
        close_error = (None if event.error is None
                       else RemoteSessionError(event.error, code="session_error"))
        return event.name, CloseEvent(reason=event.reason,  # type: ignore[arg-type]
                                      error=close_error, created_at=at)
    return event.name, event
