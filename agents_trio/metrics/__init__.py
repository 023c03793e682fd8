"""``agents_trio.metrics``: LiveKit's ``livekit.agents.metrics`` names for the metrics the
session emits in ``metrics_collected`` events. The usage collectors and ``log_metrics`` are
not implemented yet (docs/livekit-names.md)."""

from __future__ import annotations

from .base import AgentMetrics, EOUMetrics, LLMMetrics, STTMetrics, TTSMetrics, VADMetrics

__all__ = ["AgentMetrics", "EOUMetrics", "LLMMetrics", "STTMetrics", "TTSMetrics", "VADMetrics"]
