"""What a turn measured, where LiveKit puts it: the LLM step's ``LLMMetrics`` and the
``ChatMessage.metrics`` of the user message (``transcription_delay``, ``end_of_turn_delay``,
``on_user_turn_completed_delay``, when the user started and stopped speaking) and of the
assistant reply (``llm_node_ttft``, ``tts_node_ttfb``, ``e2e_latency``, when the agent
started and stopped speaking, which models answered). Times are Trio times."""

from __future__ import annotations

from typing import Any

from .events import LLMMetrics
from .generation import ReplyRequest, StepState
from .models import CompletionUsage
from .recognition import EndOfTurnInfo
from .speech_handle import SpeechHandle
from .usage import metadata_report, model_label, model_metadata


def llm_step_metrics(llm: object, handle: SpeechHandle, *, ttft: float, duration: float,
                     usage: CompletionUsage | None, request_id: str) -> LLMMetrics:
    """One LLM call's metrics; the token counts are the stream's reported usage (none
    reported: zeros), ``tokens_per_second`` the completion tokens over the call's duration."""
    completion = usage.completion_tokens if usage is not None else 0
    return LLMMetrics(
        speech_id=handle.id, request_id=request_id, label=model_label(llm), ttft=ttft,
        duration=duration, cancelled=handle.interrupted, completion_tokens=completion,
        prompt_tokens=usage.prompt_tokens if usage is not None else 0,
        prompt_cached_tokens=usage.prompt_cached_tokens if usage is not None else 0,
        cache_creation_tokens=usage.cache_creation_tokens if usage is not None else 0,
        reasoning_tokens=usage.reasoning_tokens if usage is not None else 0,
        total_tokens=usage.total_tokens if usage is not None else 0,
        tokens_per_second=completion / duration if usage is not None and duration > 0 else 0.0,
        metadata=model_metadata(llm))


def user_message_metrics(info: EndOfTurnInfo, stt: object) -> dict[str, Any]:
    """A user message's metrics from its end of turn (the hook's delay is added later)."""
    report: dict[str, Any] = {}
    if stt is not None:
        report["stt_metadata"] = metadata_report(stt)
    if info.started_speaking_at is not None:
        report["started_speaking_at"] = info.started_speaking_at
    if info.stopped_speaking_at is not None:
        report["stopped_speaking_at"] = info.stopped_speaking_at
    report["transcription_delay"] = info.transcription_delay
    report["end_of_turn_delay"] = info.end_of_turn_delay
    return report


def assistant_message_metrics(step: StepState, request: ReplyRequest, *, llm: object,
                              tts: object, now: float) -> dict[str, Any]:
    """The reply message's metrics, when its step finishes (``now``)."""
    report: dict[str, Any] = {}
    if llm is not None and request.say_text is None:
        report["llm_metadata"] = metadata_report(llm)
    if tts is not None and step.tts_ttfb is not None:
        report["tts_metadata"] = metadata_report(tts)
    if step.llm_ttft is not None:
        report["llm_node_ttft"] = step.llm_ttft
    if step.tts_ttfb is not None:
        report["tts_node_ttfb"] = step.tts_ttfb
    started = step.started_speaking_at
    if started is not None:
        report["started_speaking_at"] = started
        report["stopped_speaking_at"] = now
        user = request.user_metrics
        if user is not None and "stopped_speaking_at" in user:
            report["e2e_latency"] = started - user["stopped_speaking_at"]
    return report
