"""Helpers the parity tests script their fake LLMs with."""

from __future__ import annotations

from agents_trio.testing import FakeLLMResponse, judge_request_text, judge_verdict


def turn(after: str, say: str = "") -> FakeLLMResponse:
    """When the last chat item reads ``after``, the LLM says ``say`` (no latency)."""
    return FakeLLMResponse(input=after, content=say, ttft=0.0, duration=0.0)


def verdict(message: str, intent: str, success: bool = True) -> FakeLLMResponse:
    """The judge LLM's answer to ``judge(llm, intent=intent)`` on ``message``."""
    return FakeLLMResponse(input=judge_request_text(intent, message), content="",
                           tool_calls=[judge_verdict(success, "scripted verdict")], ttft=0.0,
                           duration=0.0)
