"""``agents_trio.metrics``: LiveKit's ``livekit.agents.metrics`` names: the metrics records
the session emits in ``metrics_collected`` events, the usage collectors (``session.usage``
is a ``ModelUsageCollector``'s totals) and ``log_metrics``."""

from __future__ import annotations

from ..usage import (AgentSessionUsage, LLMModelUsage, ModelUsage, ModelUsageCollector,
                     STTModelUsage, TTSModelUsage, UsageCollector, UsageSummary)
from .base import (AgentMetrics, EOUMetrics, LLMMetrics, Metadata, RealtimeModelMetrics,
                   STTMetrics, TTSMetrics, VADMetrics)
from .utils import log_metrics

__all__ = ["AgentMetrics", "AgentSessionUsage", "EOUMetrics", "LLMMetrics", "LLMModelUsage",
           "Metadata", "ModelUsage", "ModelUsageCollector", "RealtimeModelMetrics", "STTMetrics", "STTModelUsage",
           "TTSMetrics", "TTSModelUsage", "UsageCollector", "UsageSummary", "VADMetrics",
           "log_metrics"]
