"""Our chat items and session events in LiveKit's protobuf form, and back.

Chat items are encoded field for field as LiveKit's ``encode_chat_item`` does (text content
only; ``None`` fields left unset; metrics by name into ``MetricsReport``). Events are encoded
as LiveKit's ``SessionHost`` streams them. Times: our items and events carry the runtime's
clock (``trio.current_time()``), and that number goes into the ``Timestamp`` fields as is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from google.protobuf.timestamp_pb2 import Timestamp
from livekit.protocol.agent_pb import agent_session as pb

from ...chat import (AgentConfigUpdate, AgentHandoff, ChatItem, ChatMessage, ChatRole,
                     FunctionCall, FunctionCallOutput)

logger = logging.getLogger("agents_trio.remote")

ROLE_TO_PB: dict[str, pb.ChatRole] = {
    "developer": pb.DEVELOPER, "system": pb.SYSTEM, "user": pb.USER, "assistant": pb.ASSISTANT,
}
ROLE_FROM_PB: dict[int, ChatRole] = {
    pb.DEVELOPER: "developer", pb.SYSTEM: "system", pb.USER: "user", pb.ASSISTANT: "assistant",
}
AGENT_STATE_TO_PB: dict[str, pb.AgentState] = {
    "initializing": pb.AS_INITIALIZING, "idle": pb.AS_IDLE, "listening": pb.AS_LISTENING,
    "thinking": pb.AS_THINKING, "speaking": pb.AS_SPEAKING,
}
AGENT_STATE_FROM_PB: dict[int, str] = {v: k for k, v in AGENT_STATE_TO_PB.items()}
USER_STATE_TO_PB: dict[str, pb.UserState] = {
    "speaking": pb.US_SPEAKING, "listening": pb.US_LISTENING, "away": pb.US_AWAY,
}
USER_STATE_FROM_PB: dict[int, str] = {v: k for k, v in USER_STATE_TO_PB.items()}

_TIMESTAMP_METRICS = frozenset({"started_speaking_at", "stopped_speaking_at"})


def timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def seconds(ts: Timestamp) -> float:
    return float(ts.ToNanoseconds()) / 1e9


def encode_metrics(metrics: Mapping[str, float]) -> pb.MetricsReport:
    """The metrics LiveKit's report names, by name; others are left out."""
    report = pb.MetricsReport()
    names = {f.name for f in pb.MetricsReport.DESCRIPTOR.fields}
    for name, value in metrics.items():
        if name not in names or value is None:
            continue
        if name in _TIMESTAMP_METRICS:
            getattr(report, name).CopyFrom(timestamp(float(value)))
        else:
            setattr(report, name, float(value))
    return report


def encode_chat_item(item: ChatItem) -> pb.ChatContext.ChatItem:
    """A chat item as LiveKit encodes it (an empty ``ChatItem`` for an unknown type)."""
    if isinstance(item, ChatMessage):
        message = pb.ChatMessage(
            id=item.id, role=ROLE_TO_PB[item.role], interrupted=item.interrupted,
            content=[pb.ChatMessage.ChatContent(text=c) for c in item.content
                     if isinstance(c, str)],
            metrics=encode_metrics(item.metrics), created_at=timestamp(item.created_at))
        if item.transcript_confidence is not None:
            message.transcript_confidence = item.transcript_confidence
        return pb.ChatContext.ChatItem(message=message)
    if isinstance(item, FunctionCall):
        return pb.ChatContext.ChatItem(function_call=pb.FunctionCall(
            id=item.id, call_id=item.call_id, arguments=item.arguments, name=item.name,
            created_at=timestamp(item.created_at)))
    if isinstance(item, FunctionCallOutput):
        return pb.ChatContext.ChatItem(function_call_output=pb.FunctionCallOutput(
            id=item.id, name=item.name, call_id=item.call_id, output=item.output,
            is_error=item.is_error, created_at=timestamp(item.created_at)))
    if isinstance(item, AgentHandoff):
        handoff = pb.AgentHandoff(id=item.id, new_agent_id=item.new_agent_id,
                                  created_at=timestamp(item.created_at))
        if item.old_agent_id is not None:
            handoff.old_agent_id = item.old_agent_id
        return pb.ChatContext.ChatItem(agent_handoff=handoff)
    if isinstance(item, AgentConfigUpdate):
        update = pb.AgentConfigUpdate(id=item.id, tools_added=item.tools_added or [],
                                      tools_removed=item.tools_removed or [],
                                      created_at=timestamp(item.created_at))
        if item.instructions:
            update.instructions = str(item.instructions)
        return pb.ChatContext.ChatItem(agent_config_update=update)
    return pb.ChatContext.ChatItem()


def encode_chat_items(items: Iterable[object]) -> list[pb.ChatContext.ChatItem]:
    """Chat items in LiveKit's form; objects that are no chat item are left out."""
    chat_types = (ChatMessage, FunctionCall, FunctionCallOutput, AgentHandoff, AgentConfigUpdate)
    return [encode_chat_item(item) for item in items if isinstance(item, chat_types)]


def decode_chat_item(item: pb.ChatContext.ChatItem) -> ChatItem | None:
    """Our chat item for a LiveKit one; None for an empty item or a role we do not know."""
    kind = item.WhichOneof("item")
    if kind == "message":
        m = item.message
        role = ROLE_FROM_PB.get(m.role)
        if role is None:
            return None
        metrics: dict[str, float] = {}
        for field, value in m.metrics.ListFields():
            metrics[field.name] = (seconds(value) if field.name in _TIMESTAMP_METRICS
                                   else float(value))
        return ChatMessage(
            id=m.id, role=role, content=[c.text for c in m.content], interrupted=m.interrupted,
            transcript_confidence=(m.transcript_confidence
                                   if m.HasField("transcript_confidence") else None),
            metrics=metrics, created_at=seconds(m.created_at))
    if kind == "function_call":
        fc = item.function_call
        return FunctionCall(id=fc.id, call_id=fc.call_id, name=fc.name, arguments=fc.arguments,
                            created_at=seconds(fc.created_at))
    if kind == "function_call_output":
        fo = item.function_call_output
        return FunctionCallOutput(id=fo.id, call_id=fo.call_id, name=fo.name, output=fo.output,
                                  is_error=fo.is_error, created_at=seconds(fo.created_at))
    if kind == "agent_handoff":
        h = item.agent_handoff
        return AgentHandoff(id=h.id, new_agent_id=h.new_agent_id,
                            old_agent_id=h.old_agent_id if h.HasField("old_agent_id") else None,
                            created_at=seconds(h.created_at))
    if kind == "agent_config_update":
        u = item.agent_config_update
        return AgentConfigUpdate(
            id=u.id, instructions=u.instructions if u.HasField("instructions") else None,
            tools_added=list(u.tools_added) or None, tools_removed=list(u.tools_removed) or None,
            created_at=seconds(u.created_at))
    return None


def decode_chat_items(items: Iterable[pb.ChatContext.ChatItem]) -> list[ChatItem]:
    return [d for d in (decode_chat_item(i) for i in items) if d is not None]


# --------------------------------------------------------------------------------------------
# Events

FORWARDED_EVENTS = ("agent_state_changed", "user_state_changed", "conversation_item_added",
                    "user_input_transcribed", "function_tools_executed",
                    "agent_false_interruption", "error")
"""The session events LiveKit's host streams that this runtime emits."""


def encode_event(event: object) -> pb.AgentSessionEvent | None:
    """A session event as LiveKit's host streams it, or None for one it does not stream."""
    kind = getattr(event, "type", None)
    created_at = float(getattr(event, "created_at", 0.0))
    E = pb.AgentSessionEvent  # noqa: N806
    out: pb.AgentSessionEvent | None = None
    if kind == "agent_state_changed":
        out = E(agent_state_changed=E.AgentStateChanged(
            old_state=AGENT_STATE_TO_PB.get(getattr(event, "old_state", ""), pb.AS_IDLE),
            new_state=AGENT_STATE_TO_PB.get(getattr(event, "new_state", ""), pb.AS_IDLE)))
    elif kind == "user_state_changed":
        out = E(user_state_changed=E.UserStateChanged(
            old_state=USER_STATE_TO_PB.get(getattr(event, "old_state", ""), pb.US_LISTENING),
            new_state=USER_STATE_TO_PB.get(getattr(event, "new_state", ""), pb.US_LISTENING)))
    elif kind == "conversation_item_added":
        items = encode_chat_items([getattr(event, "item", None)])
        if not items:
            return None
        out = E(conversation_item_added=E.ConversationItemAdded(item=items[0]))
    elif kind == "user_input_transcribed":
        transcribed = E.UserInputTranscribed(transcript=str(getattr(event, "transcript", "")),
                                             is_final=bool(getattr(event, "is_final", False)))
        language = getattr(event, "language", None)
        if language:
            transcribed.language = str(language)
        out = E(user_input_transcribed=transcribed)
    elif kind == "function_tools_executed":
        calls = [c for c in getattr(event, "function_calls", []) if isinstance(c, FunctionCall)]
        outputs = [o for o in getattr(event, "function_call_outputs", [])
                   if isinstance(o, FunctionCallOutput)]
        out = E(function_tools_executed=E.FunctionToolsExecuted(
            function_calls=[pb.FunctionCall(name=c.name, arguments=c.arguments,
                                            call_id=c.call_id) for c in calls],
            function_call_outputs=[pb.FunctionCallOutput(call_id=o.call_id, name=o.name,
                                                         output=o.output, is_error=o.is_error)
                                   for o in outputs]))
    elif kind == "agent_false_interruption":
        out = E(agent_false_interruption=E.AgentFalseInterruption(
            resumed=bool(getattr(event, "resumed", False))))
    elif kind == "error":
        error = getattr(event, "error", None)
        out = E(error=E.Error(message=str(error) if error else "Unknown error"))
    if out is None:
        return None
    out.created_at.CopyFrom(timestamp(created_at))
    return out


# --------------------------------------------------------------------------------------------
# Usage


def _model_labels(model: object) -> tuple[str, str]:
    """(provider, model) of a model object, as far as it says."""
    if model is None:
        return "", ""
    provider = getattr(model, "provider", None)
    name = getattr(model, "model", None)
    return (str(provider) if isinstance(provider, str) else type(model).__name__,
            str(name) if isinstance(name, str) else "")


class UsageTotals:
    """The session's model usage, summed from its ``metrics_collected`` events, in LiveKit's
    ``AgentSessionUsage`` form (one entry per kind of model that reported any)."""

    def __init__(self, session: object) -> None:
        self._labels = {kind: _model_labels(getattr(session, kind, None))
                        for kind in ("llm", "tts", "stt")}
        self.llm_input_tokens = 0
        self.llm_output_tokens = 0
        self.tts_characters = 0
        self.tts_audio = 0.0
        self.stt_audio = 0.0
        self._seen: set[str] = set()

    def add(self, metrics: object) -> bool:
        """Count one metrics record; True when it changed the totals."""
        kind = getattr(metrics, "type", "")
        if kind == "llm_metrics":
            self.llm_input_tokens += int(getattr(metrics, "prompt_tokens", 0))
            self.llm_output_tokens += int(getattr(metrics, "completion_tokens", 0))
            self._seen.add("llm")
        elif kind == "tts_metrics":
            self.tts_characters += int(getattr(metrics, "characters_count", 0))
            self.tts_audio += float(getattr(metrics, "audio_duration", 0.0))
            self._seen.add("tts")
        elif kind == "stt_metrics":
            self.stt_audio += float(getattr(metrics, "audio_duration", 0.0))
            self._seen.add("stt")
        else:
            return False
        return True

    def to_pb(self) -> pb.AgentSessionUsage:
        usage = pb.AgentSessionUsage()
        if "llm" in self._seen:
            provider, model = self._labels["llm"]
            usage.model_usage.add().llm.CopyFrom(pb.LLMModelUsage(
                provider=provider, model=model, input_tokens=self.llm_input_tokens,
                output_tokens=self.llm_output_tokens))
        if "tts" in self._seen:
            provider, model = self._labels["tts"]
            usage.model_usage.add().tts.CopyFrom(pb.TTSModelUsage(
                provider=provider, model=model, characters_count=self.tts_characters,
                audio_duration=self.tts_audio))
        if "stt" in self._seen:
            provider, model = self._labels["stt"]
            usage.model_usage.add().stt.CopyFrom(pb.STTModelUsage(
                provider=provider, model=model, audio_duration=self.stt_audio))
        return usage
