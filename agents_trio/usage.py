"""Model usage summed from metrics records: LiveKit's ``ModelUsageCollector`` (one total per
provider and model, what ``session.usage`` reports) and its deprecated ``UsageCollector``
(one flat ``UsageSummary``)."""

from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import Literal, Protocol, Union

import msgspec

from ._ids import now
from .events import (AgentMetrics, EOUMetrics, LLMMetrics, Metadata, MetricsCollectedEvent,
                     RealtimeCachedTokenDetails, RealtimeModelMetrics, STTMetrics, TTSMetrics)


class LLMModelUsage(msgspec.Struct, kw_only=True):
    """An LLM's usage in the session (``reasoning`` tokens are part of ``output_tokens``)."""

    provider: str
    model: str
    input_tokens: int = 0
    input_cached_tokens: int = 0
    input_cache_creation_tokens: int = 0
    input_audio_tokens: int = 0
    input_cached_audio_tokens: int = 0
    input_text_tokens: int = 0
    input_cached_text_tokens: int = 0
    input_image_tokens: int = 0
    input_cached_image_tokens: int = 0
    output_tokens: int = 0
    output_audio_tokens: int = 0
    output_text_tokens: int = 0
    output_reasoning_tokens: int = 0
    session_duration: float = 0.0
    type: Literal["llm_usage"] = "llm_usage"


class TTSModelUsage(msgspec.Struct, kw_only=True):
    """A TTS's usage in the session."""

    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    characters_count: int = 0
    audio_duration: float = 0.0
    type: Literal["tts_usage"] = "tts_usage"


class STTModelUsage(msgspec.Struct, kw_only=True):
    """An STT's usage in the session."""

    provider: str
    model: str
    input_tokens: int = 0
    input_audio_tokens: int = 0
    output_tokens: int = 0
    audio_duration: float = 0.0
    type: Literal["stt_usage"] = "stt_usage"


ModelUsage = Union[LLMModelUsage, TTSModelUsage, STTModelUsage]


@dataclasses.dataclass
class AgentSessionUsage:
    """What ``session.usage`` returns: one entry per provider and model that reported."""

    model_usage: list[ModelUsage]


def model_label(model: object) -> str:
    """A model's ``label`` (LiveKit's: its class's module and name)."""
    label = getattr(model, "label", None)
    return label if isinstance(label, str) else f"{type(model).__module__}.{type(model).__name__}"


def model_metadata(model: object) -> Metadata:
    """Which model this is, for its metrics: its ``model`` and ``provider`` (LiveKit's
    defaults, ``"unknown"``, when it does not say)."""
    name = getattr(model, "model", None)
    provider = getattr(model, "provider", None)
    return Metadata(model_name=name if isinstance(name, str) else "unknown",
                    model_provider=provider if isinstance(provider, str) else "unknown")


def metadata_report(model: object) -> dict[str, str]:
    """``model_metadata`` as a chat message's metrics hold it (``llm_metadata``, …)."""
    meta = model_metadata(model)
    return {"model_name": meta.model_name or "unknown",
            "model_provider": meta.model_provider or "unknown"}


def _provider_model(metadata: Metadata | None) -> tuple[str, str]:
    if metadata is None:
        return "", ""
    return metadata.model_provider or "", metadata.model_name or ""


class ModelUsageCollector:
    """Sums LLM, TTS and STT metrics per (provider, model), from their ``metadata``.
    Callable: ``collector(metrics)`` is ``collector.collect(metrics)``."""

    def __init__(self) -> None:
        self._llm: dict[tuple[str, str], LLMModelUsage] = {}
        self._tts: dict[tuple[str, str], TTSModelUsage] = {}
        self._stt: dict[tuple[str, str], STTModelUsage] = {}

    def __call__(self, metrics: AgentMetrics) -> None:
        self.collect(metrics)

    def collect(self, metrics: AgentMetrics) -> None:
        """Add one metrics record to its model's total (other kinds are ignored)."""
        key = _provider_model(metrics.metadata)
        if isinstance(metrics, LLMMetrics):
            llm = self._llm.setdefault(key, LLMModelUsage(provider=key[0], model=key[1]))
            llm.input_tokens += metrics.prompt_tokens
            llm.input_cached_tokens += metrics.prompt_cached_tokens
            llm.input_cache_creation_tokens += metrics.cache_creation_tokens
            llm.output_tokens += metrics.completion_tokens
            llm.output_reasoning_tokens += metrics.reasoning_tokens
        elif isinstance(metrics, RealtimeModelMetrics):
            _add_realtime(self._llm.setdefault(key, LLMModelUsage(provider=key[0],
                                                                  model=key[1])), metrics)
        elif isinstance(metrics, TTSMetrics):
            tts = self._tts.setdefault(key, TTSModelUsage(provider=key[0], model=key[1]))
            tts.input_tokens += metrics.input_tokens
            tts.output_tokens += metrics.output_tokens
            tts.characters_count += metrics.characters_count
            tts.audio_duration += metrics.audio_duration
        elif isinstance(metrics, STTMetrics):
            stt = self._stt.setdefault(key, STTModelUsage(provider=key[0], model=key[1]))
            stt.input_tokens += metrics.input_tokens
            stt.input_audio_tokens += metrics.input_audio_tokens
            stt.output_tokens += metrics.output_tokens
            stt.audio_duration += metrics.audio_duration

    def flatten(self) -> list[ModelUsage]:
        """Copies of the totals: LLMs, then TTSs, then STTs, each in first-report order."""
        usage: list[ModelUsage] = []
        for totals in (self._llm, self._tts, self._stt):
            usage.extend(copy.copy(u) for u in totals.values())
        return usage


def _add_realtime(usage: LLMModelUsage, metrics: RealtimeModelMetrics) -> None:
    """A realtime response's tokens added to its model's LLM usage, as LiveKit counts them."""
    inp, out = metrics.input_token_details, metrics.output_token_details
    cached = inp.cached_tokens_details or RealtimeCachedTokenDetails()
    usage.input_tokens += metrics.input_tokens
    usage.input_cached_tokens += inp.cached_tokens
    usage.input_text_tokens += inp.text_tokens
    usage.input_cached_text_tokens += cached.text_tokens
    usage.input_image_tokens += inp.image_tokens
    usage.input_cached_image_tokens += cached.image_tokens
    usage.input_audio_tokens += inp.audio_tokens
    usage.input_cached_audio_tokens += cached.audio_tokens
    usage.output_text_tokens += out.text_tokens
    usage.output_audio_tokens += out.audio_tokens
    usage.output_tokens += metrics.output_tokens
    usage.session_duration += metrics.session_duration


@dataclasses.dataclass
class UsageSummary:
    """LiveKit's deprecated flat usage total (``ModelUsageCollector`` replaces it)."""

    llm_prompt_tokens: int = 0
    llm_prompt_cached_tokens: int = 0
    llm_input_audio_tokens: int = 0
    llm_input_cached_audio_tokens: int = 0
    llm_input_text_tokens: int = 0
    llm_input_cached_text_tokens: int = 0
    llm_input_image_tokens: int = 0
    llm_input_cached_image_tokens: int = 0
    llm_completion_tokens: int = 0
    llm_output_audio_tokens: int = 0
    llm_output_image_tokens: int = 0
    llm_output_text_tokens: int = 0
    tts_characters_count: int = 0
    tts_audio_duration: float = 0.0
    stt_audio_duration: float = 0.0
    stt_input_tokens: int = 0
    stt_output_tokens: int = 0
    stt_input_audio_tokens: int = 0

    @property
    def llm_input_tokens(self) -> int:
        return self.llm_prompt_tokens

    @property
    def llm_output_tokens(self) -> int:
        return self.llm_completion_tokens


class UsageCollector:
    """LiveKit's deprecated collector of one flat ``UsageSummary`` (warns as LiveKit's does;
    use ``ModelUsageCollector``)."""

    def __init__(self) -> None:
        warnings.warn("UsageCollector is deprecated; use ModelUsageCollector",
                      DeprecationWarning, stacklevel=2)
        self._summary = UsageSummary()

    def __call__(self, metrics: AgentMetrics) -> None:
        self.collect(metrics)

    def collect(self, metrics: AgentMetrics) -> None:
        s = self._summary
        if isinstance(metrics, LLMMetrics):
            s.llm_prompt_tokens += metrics.prompt_tokens
            s.llm_prompt_cached_tokens += metrics.prompt_cached_tokens
            s.llm_completion_tokens += metrics.completion_tokens
        elif isinstance(metrics, RealtimeModelMetrics):
            inp, out = metrics.input_token_details, metrics.output_token_details
            cached = inp.cached_tokens_details or RealtimeCachedTokenDetails()
            s.llm_prompt_tokens += metrics.input_tokens
            s.llm_prompt_cached_tokens += inp.cached_tokens
            s.llm_input_text_tokens += inp.text_tokens
            s.llm_input_cached_text_tokens += cached.text_tokens
            s.llm_input_image_tokens += inp.image_tokens
            s.llm_input_cached_image_tokens += cached.image_tokens
            s.llm_input_audio_tokens += inp.audio_tokens
            s.llm_input_cached_audio_tokens += cached.audio_tokens
            s.llm_output_text_tokens += out.text_tokens
            s.llm_output_image_tokens += out.image_tokens
            s.llm_output_audio_tokens += out.audio_tokens
            s.llm_completion_tokens += metrics.output_tokens
        elif isinstance(metrics, TTSMetrics):
            s.tts_characters_count += metrics.characters_count
            s.tts_audio_duration += metrics.audio_duration
        elif isinstance(metrics, STTMetrics):
            s.stt_audio_duration += metrics.audio_duration
            s.stt_input_tokens += metrics.input_tokens
            s.stt_output_tokens += metrics.output_tokens
            s.stt_input_audio_tokens += metrics.input_audio_tokens

    def get_summary(self) -> UsageSummary:
        return copy.copy(self._summary)


class SessionUsageUpdatedEvent(msgspec.Struct, kw_only=True):
    """The session's usage after a model reported metrics (``session.on("session_usage_updated")``)."""

    usage: AgentSessionUsage
    created_at: float = msgspec.field(default_factory=now)
    type: Literal["session_usage_updated"] = "session_usage_updated"


class EventSink(Protocol):
    """Where a session's events go (its ``EventFanout``)."""

    def emit(self, name: str, event: object) -> None: ...

    def wanted(self, name: str) -> bool: ...


class SessionUsage:
    """A session's metrics and usage events: each metrics record is emitted as
    ``metrics_collected``; a model's (not the end-of-turn record) is first added to the
    usage totals, and ``session_usage_updated`` follows with the new totals, as LiveKit does."""

    def __init__(self, events: EventSink) -> None:
        self._events = events
        self._collector = ModelUsageCollector()

    @property
    def usage(self) -> AgentSessionUsage:
        return AgentSessionUsage(model_usage=self._collector.flatten())

    def report(self, metrics: AgentMetrics) -> None:
        counted = not isinstance(metrics, EOUMetrics)
        if counted:
            self._collector.collect(metrics)
        events = self._events
        events.emit("metrics_collected", MetricsCollectedEvent(metrics=metrics))
        # the totals are copied for the event: only when someone listens (a few per turn)
        if counted and events.wanted("session_usage_updated"):
            events.emit("session_usage_updated", SessionUsageUpdatedEvent(usage=self.usage))
