"""``agents_trio.metrics.base``: the metrics classes, where LiveKit defines them."""

from __future__ import annotations

from ..events import (AgentMetrics, EOUMetrics, LLMMetrics, Metadata, RealtimeModelMetrics,
                      STTMetrics, TTSMetrics, VADMetrics)

__all__ = ["AgentMetrics", "EOUMetrics", "LLMMetrics", "Metadata", "RealtimeModelMetrics",
           "STTMetrics", "TTSMetrics", "VADMetrics"]
