"""``agents_trio.metrics.utils``: ``log_metrics``, one INFO log line per metrics record."""

from __future__ import annotations

import logging

from ..events import (AgentMetrics, EOUMetrics, LLMMetrics, RealtimeCachedTokenDetails,
                      RealtimeModelMetrics, STTMetrics, TTSMetrics)

_default_logger = logging.getLogger("agents_trio")


def log_metrics(metrics: AgentMetrics, *, logger: logging.Logger | None = None) -> None:
    """Log ``metrics`` at INFO as LiveKit's ``log_metrics`` does: the message names the kind
    (``"LLM metrics"``, ``"RealtimeModel metrics"``, ``"TTS metrics"``, ``"EOU metrics"``, ``"STT metrics"``) and the
    figures go in the record's ``extra`` fields, with ``model_name``/``model_provider`` when
    the record has metadata. VAD metrics are not logged (nor are they by LiveKit)."""
    logger = logger or _default_logger
    extra: dict[str, str | float] = {}
    if metrics.metadata is not None:
        extra["model_name"] = metrics.metadata.model_name or "unknown"
        extra["model_provider"] = metrics.metadata.model_provider or "unknown"
    if isinstance(metrics, LLMMetrics):
        logger.info("LLM metrics", extra=extra | {
            "ttft": round(metrics.ttft, 2), "prompt_tokens": metrics.prompt_tokens,
            "prompt_cached_tokens": metrics.prompt_cached_tokens,
            "cache_creation_tokens": metrics.cache_creation_tokens,
            "completion_tokens": metrics.completion_tokens,
            "reasoning_tokens": metrics.reasoning_tokens,
            "tokens_per_second": round(metrics.tokens_per_second, 2)})
    elif isinstance(metrics, RealtimeModelMetrics):
        inp, out = metrics.input_token_details, metrics.output_token_details
        cached = inp.cached_tokens_details or RealtimeCachedTokenDetails()
        logger.info("RealtimeModel metrics", extra=extra | {
            "ttft": round(metrics.ttft, 2), "input_tokens": metrics.input_tokens,
            "cached_input_tokens": inp.cached_tokens,
            "input_text_tokens": inp.text_tokens, "input_cached_text_tokens": cached.text_tokens,
            "input_image_tokens": inp.image_tokens,
            "input_cached_image_tokens": cached.image_tokens,
            "input_audio_tokens": inp.audio_tokens,
            "input_cached_audio_tokens": cached.audio_tokens,
            "output_tokens": metrics.output_tokens, "output_text_tokens": out.text_tokens,
            "output_audio_tokens": out.audio_tokens, "output_image_tokens": out.image_tokens,
            "total_tokens": metrics.total_tokens,
            "tokens_per_second": round(metrics.tokens_per_second, 2)})
    elif isinstance(metrics, TTSMetrics):
        logger.info("TTS metrics", extra=extra | {
            "ttfb": metrics.ttfb, "audio_duration": round(metrics.audio_duration, 2)})
    elif isinstance(metrics, EOUMetrics):
        logger.info("EOU metrics", extra=extra | {
            "end_of_utterance_delay": round(metrics.end_of_utterance_delay, 2),
            "transcription_delay": round(metrics.transcription_delay, 2)})
    elif isinstance(metrics, STTMetrics):
        logger.info("STT metrics", extra=extra | {
            "audio_duration": round(metrics.audio_duration, 2),
            "input_tokens": metrics.input_tokens, "output_tokens": metrics.output_tokens,
            "total_tokens": metrics.total_tokens or 0,
            "input_audio_tokens": metrics.input_audio_tokens})
