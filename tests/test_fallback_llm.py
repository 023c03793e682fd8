"""llm.FallbackAdapter with failing fake LLMs on virtual time: fallback order, timeouts,
retries, chunks already sent, availability events and recovery probes owned by the adapter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from agents_trio import APIConnectionError, APIStatusError, ChatContext
from agents_trio.llm import AvailabilityChangedEvent, ChatChunk, FallbackAdapter


class ScriptedLLM:
    """Each request takes the next behaviour: "ok", "fail", "hang", "fail-after-chunk",
    "slow" (answers after 3 s); the last one repeats."""

    def __init__(self, label: str, *behaviours: str) -> None:
        self.label = label
        self.behaviours = list(behaviours)
        self.requests = 0

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
                   tool_choice: object = None) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        behaviour = self.behaviours[min(self.requests, len(self.behaviours) - 1)]
        self.requests += 1
        yield self._stream(behaviour)

    async def _stream(self, behaviour: str) -> AsyncIterator[ChatChunk]:
        await trio.sleep(0.1)
        if behaviour == "fail":
            raise APIStatusError("down", status_code=503)
        if behaviour == "hang":
            await trio.sleep_forever()
        if behaviour == "slow":
            await trio.sleep(3)
        yield ChatChunk(content=f"{self.label}:1 ")
        if behaviour == "fail-after-chunk":
            raise APIStatusError("broke", status_code=503)
        yield ChatChunk(content=f"{self.label}:2")


async def _ask(adapter: FallbackAdapter) -> str:
    parts = []
    async with adapter.chat(chat_ctx=ChatContext()) as stream:
        async for chunk in stream:
            parts.append(chunk.content or "")
    return "".join(parts)


async def test_falls_back_and_reports_availability(autojump_clock: object) -> None:
    a, b = ScriptedLLM("a", "fail"), ScriptedLLM("b", "ok")
    events: list[tuple[str, bool]] = []
    first: list[object] = []
    async with FallbackAdapter([a, b]) as adapter:
        adapter.on("llm_availability_changed",
                   lambda ev: events.append((ev.llm.label, ev.available)))
        adapter.once("llm_availability_changed", first.append)
        assert await _ask(adapter) == "b:1 b:2"
        assert not adapter.available(a) and adapter.available(b)
        assert len(first) == 1
        # the next request goes straight to b while a is unavailable
        assert await _ask(adapter) == "b:1 b:2"
    assert events[0] == ("a", False)
    assert isinstance(AvailabilityChangedEvent(llm=a, available=True), AvailabilityChangedEvent)


async def test_a_recovery_probe_makes_the_llm_available_again(autojump_clock: object) -> None:
    a, b = ScriptedLLM("a", "fail", "ok"), ScriptedLLM("b", "ok")
    events: list[tuple[str, bool]] = []
    async with FallbackAdapter([a, b]) as adapter:
        adapter.on("llm_availability_changed",
                   lambda ev: events.append((ev.llm.label, ev.available)))
        assert await _ask(adapter) == "b:1 b:2"
        await trio.sleep(1)  # the probe of a (its second request) succeeds meanwhile
        assert adapter.available(a)
        assert await _ask(adapter) == "a:1 a:2"
    assert events == [("a", False), ("a", True)]


async def test_leaving_the_block_cancels_a_running_probe(autojump_clock: object) -> None:
    a, b = ScriptedLLM("a", "fail", "hang"), ScriptedLLM("b", "ok")
    with trio.fail_after(60):
        async with FallbackAdapter([a, b], attempt_timeout=1000) as adapter:
            assert await _ask(adapter) == "b:1 b:2"
            await trio.sleep(1)
            assert a.requests == 2  # the probe hangs in a
    assert not adapter.available(a)


async def test_attempt_timeout_and_retries(autojump_clock: object) -> None:
    a, b = ScriptedLLM("a", "slow", "ok"), ScriptedLLM("b", "ok")
    async with FallbackAdapter([a, b], attempt_timeout=1, max_retry_per_llm=1,
                               retry_interval=0.5) as adapter:
        # a times out once, then its retry answers
        assert await _ask(adapter) == "a:1 a:2"
        assert (a.requests, b.requests) == (2, 0)


async def test_no_fallback_after_chunks_unless_asked(autojump_clock: object) -> None:
    a, b = ScriptedLLM("a", "fail-after-chunk"), ScriptedLLM("b", "ok")
    async with FallbackAdapter([a, b]) as adapter:
        with pytest.raises(APIStatusError):
            await _ask(adapter)
    a2, b2 = ScriptedLLM("a", "fail-after-chunk"), ScriptedLLM("b", "ok")
    async with FallbackAdapter([a2, b2], retry_on_chunk_sent=True) as adapter:
        assert await _ask(adapter) == "a:1 b:1 b:2"


async def test_all_failing_raises_and_then_all_are_tried_again(autojump_clock: object) -> None:
    a, b = ScriptedLLM("a", "fail"), ScriptedLLM("b", "fail")
    async with FallbackAdapter([a, b]) as adapter:
        with pytest.raises(APIConnectionError, match="all LLMs failed"):
            await _ask(adapter)
        await trio.sleep(1)  # the probes fail too
        before = (a.requests, b.requests)
        with pytest.raises(APIConnectionError):
            await _ask(adapter)
        assert a.requests > before[0] and b.requests > before[1]


async def test_sticky_keeps_the_llm_that_answered(autojump_clock: object) -> None:
    a, b = ScriptedLLM("a", "fail", "ok"), ScriptedLLM("b", "ok")
    async with FallbackAdapter([a, b], sticky=True) as adapter:
        assert await _ask(adapter) == "b:1 b:2"
        await trio.sleep(1)
        assert adapter.available(a)
        assert await _ask(adapter) == "b:1 b:2"  # b answered last: it stays first


def test_construction_errors_and_use_before_open() -> None:
    with pytest.raises(ValueError):
        FallbackAdapter([])
    with pytest.raises(ValueError):
        FallbackAdapter([ScriptedLLM("a", "ok")], attempt_timeout=0)
    with pytest.raises(RuntimeError, match="open the FallbackAdapter"):
        FallbackAdapter([ScriptedLLM("a", "ok")]).chat(chat_ctx=ChatContext())


async def test_a_session_answers_through_the_fallback(autojump_clock: object) -> None:
    from agents_trio import Agent, AgentSession
    from agents_trio.testing import FakeActions, FakeLLM

    actions = FakeActions()
    actions.add_llm("hello from the backup", input="hi")
    primary = ScriptedLLM("primary", "fail")
    async with FallbackAdapter([primary, FakeLLM(actions.llm_responses)]) as adapter, \
            AgentSession(llm=adapter) as session:
        await session.start(Agent(instructions="Be kind."))
        with trio.fail_after(30):
            result = await session.run(user_input="hi")
        result.expect.next_event().is_message(role="assistant")
        assert primary.requests >= 1 and not adapter.available(primary)
