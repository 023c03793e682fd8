"""STT context options as LiveKit's: static keyterms reach an STT that accepts them; an LLM
detects more every ``turn_interval`` user turns, one pass at a time, bounded by ``timeout``;
pending terms wait for confirmation; the session's close cancels a pass; conversation turns
go to an STT that reads them."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from agents_trio import Agent, AgentSession, STTContextOptions
from agents_trio.chat import ChatContext
from agents_trio.keyterm_detection import apply_pass, detection_prompt, parse_record_keyterms
from agents_trio.model_capabilities import STTCapabilities
from agents_trio.metrics import LLMMetrics
from agents_trio.models import ChatChunk, CompletionUsage, FunctionToolCall
from agents_trio.stt_context import resolve_stt_context


class KeytermSTT:
    """An STT that records the keyterm lists and conversation items it is given."""

    def __init__(self, *, keyterms: bool = True, chat_context: bool = False) -> None:
        self.capabilities = STTCapabilities(streaming=True, interim_results=False,
                                            keyterms=keyterms, chat_context=chat_context)
        self.applied: list[list[str]] = []
        self.items: list[Any] = []

    def stream(self) -> Any:  # noqa: ANN401 - never opened: the tests type their turns
        raise AssertionError("no audio in these tests")

    def update_session_keyterms(self, keyterms: list[str]) -> None:
        self.applied.append(list(keyterms))

    def push_conversation_item(self, event: Any) -> None:  # noqa: ANN401
        self.items.append(event.item)


class ReplyLLM:
    """The agent's LLM: answers every turn with "ok"."""

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: Any = None,  # noqa: ANN401
                   tool_choice: Any = None) -> AsyncIterator[Any]:  # noqa: ANN401
        async def chunks() -> AsyncIterator[ChatChunk]:
            yield ChatChunk(content="ok")
        yield chunks()


class DetectionLLM:
    """Answers each detection request with the next scripted ``record_keyterms`` call
    (pending, confirm, remove) after ``delay`` seconds, then its usage; records the
    requests."""

    model = "detector-1"
    provider = "fakeco"

    def __init__(self, answers: list[tuple[list[str], list[str], list[str]]], *,
                 delay: float = 0.0, fail: bool = False) -> None:
        self.answers = list(answers)
        self.delay = delay
        self.fail = fail
        self.requests: list[tuple[ChatContext, Any, Any]] = []
        self.finished = 0

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: Any = None,  # noqa: ANN401
                   tool_choice: Any = None) -> AsyncIterator[Any]:  # noqa: ANN401
        self.requests.append((chat_ctx, tools, tool_choice))
        await trio.sleep(self.delay)
        if self.fail:
            raise RuntimeError("detection model down")
        pending, confirm, remove = self.answers.pop(0) if self.answers else ([], [], [])
        args = json.dumps({"pending": pending, "confirm": confirm, "remove": remove})
        self.finished += 1

        async def chunks() -> AsyncIterator[ChatChunk]:
            yield ChatChunk(id="kt-1", tool_calls=[FunctionToolCall(
                name="record_keyterms", arguments=args, call_id="c1")])
            yield ChatChunk(id="kt-1", usage=CompletionUsage(
                prompt_tokens=50, completion_tokens=8, total_tokens=58))
        yield chunks()


def _session(stt: KeytermSTT, options: STTContextOptions) -> AgentSession:
    return AgentSession(stt=stt, llm=ReplyLLM(), stt_context_options=options)


async def _say(session: AgentSession, *lines: str) -> None:
    for line in lines:
        await session.run(user_input=line)


async def test_static_keyterms_reach_the_stt_when_the_agent_starts(autojump_clock) -> None:
    stt = KeytermSTT()
    async with _session(stt, {"keyterms": ["LiveKit", "Acme", "LiveKit"]}) as session:
        await session.start(Agent(instructions="x"))
        assert stt.applied == [["LiveKit", "Acme"]]
        assert session.keyterms == ["LiveKit", "Acme"]
        session.update_options(keyterms=["Trio"])
        assert stt.applied[-1] == ["Trio"]


async def test_detected_terms_are_applied_once_confirmed(autojump_clock) -> None:
    stt = KeytermSTT()
    detector = DetectionLLM([(["Zyxel"], [], []), ([], ["Zyxel"], [])])
    options: STTContextOptions = {"keyterms": ["Acme"],
                                  "keyterm_detection": {"enabled": True, "llm": detector}}
    async with _session(stt, options) as session:
        await session.start(Agent(instructions="x"))
        await _say(session, "I use a zyxel router")
        await trio.sleep(1)
        assert session.keyterms == ["Acme"]   # pending: tracked, not applied
        assert session.stt_context.pending_keyterms == ["Zyxel"]
        await _say(session, "yes Zyxel, Z Y X E L")
        await trio.sleep(1)
        assert session.keyterms == ["Acme", "Zyxel"]
        assert stt.applied[-1] == ["Acme", "Zyxel"]
    _, tools, tool_choice = detector.requests[0]
    assert [t.info.name for t in tools] == ["record_keyterms"]
    assert tool_choice == "required"
    prompt = detector.requests[1][0].items[-1].text_content
    assert "Zyxel" in prompt.split("## Keyterms pending")[1]   # fed back as pending
    assert "Acme" in prompt.split("## Keyterms applied now")[1]


async def test_a_pass_runs_every_turn_interval_user_turns(autojump_clock) -> None:
    stt = KeytermSTT()
    detector = DetectionLLM([])
    options: STTContextOptions = {"keyterm_detection": {
        "enabled": True, "llm": detector, "turn_interval": 3}}
    async with _session(stt, options) as session:
        await session.start(Agent(instructions="x"))
        for n in range(7):
            await _say(session, f"turn {n}")
            await trio.sleep(1)
    assert len(detector.requests) == 2   # after turns 3 and 6
    last_user = [item.text_content for item in detector.requests[1][0].items]
    assert "turn 5" in last_user[-1] and "turn 6" not in last_user[-1]


async def test_a_turn_during_a_running_pass_starts_none(autojump_clock) -> None:
    stt = KeytermSTT()
    detector = DetectionLLM([], delay=5.0)
    options: STTContextOptions = {"keyterm_detection": {
        "enabled": True, "llm": detector, "timeout": 60}}
    async with _session(stt, options) as session:
        await session.start(Agent(instructions="x"))
        await _say(session, "one", "two", "three")   # quicker than a pass
        await trio.sleep(10)
        await _say(session, "four")
        await trio.sleep(10)
    assert len(detector.requests) == 2
    assert detector.finished == 2


async def test_a_pass_over_the_timeout_is_dropped_without_change(autojump_clock,
                                                                 caplog) -> None:
    stt = KeytermSTT()
    detector = DetectionLLM([([], ["Zyxel"], [])], delay=3.0)
    options: STTContextOptions = {"keyterm_detection": {
        "enabled": True, "llm": detector, "timeout": 2.0}}
    with caplog.at_level(logging.WARNING, logger="agents_trio"):
        async with _session(stt, options) as session:
            await session.start(Agent(instructions="x"))
            await _say(session, "zyxel")
            await trio.sleep(10)
            assert session.keyterms == []
            assert stt.applied == []
            detector.delay = 1.0
            await _say(session, "zyxel again")   # the runner is free again
            await trio.sleep(10)
            assert session.keyterms == ["Zyxel"]
    assert detector.finished == 1
    assert any("pass dropped" in r.getMessage() for r in caplog.records)


async def test_a_failing_detection_llm_changes_nothing_and_is_logged(autojump_clock,
                                                                     caplog) -> None:
    stt = KeytermSTT()
    detector = DetectionLLM([], fail=True)
    options: STTContextOptions = {"keyterms": ["Acme"], "keyterm_detection": {
        "enabled": True, "llm": detector}}
    with caplog.at_level(logging.ERROR, logger="agents_trio"):
        async with _session(stt, options) as session:
            await session.start(Agent(instructions="x"))
            await _say(session, "hello", "again")
            await trio.sleep(1)
            assert session.keyterms == ["Acme"]
    assert len(detector.requests) == 2   # the session went on detecting
    assert any("keyterm detection failed" in r.getMessage() for r in caplog.records)


async def test_closing_the_session_cancels_a_running_pass(autojump_clock) -> None:
    stt = KeytermSTT()
    detector = DetectionLLM([([], ["Late"], [])], delay=30.0)
    options: STTContextOptions = {"keyterm_detection": {
        "enabled": True, "llm": detector, "timeout": 60}}
    async with _session(stt, options) as session:
        await session.start(Agent(instructions="x"))
        await _say(session, "hello")
        await trio.sleep(1)
        assert len(detector.requests) == 1
        closed_at = trio.current_time()
    assert trio.current_time() - closed_at < 30.0
    assert detector.finished == 0 and session.keyterms == []


async def test_detection_is_off_for_an_stt_without_keyterms(autojump_clock, caplog) -> None:
    stt = KeytermSTT(keyterms=False)
    detector = DetectionLLM([])
    with caplog.at_level(logging.WARNING, logger="agents_trio"):
        async with _session(stt, {"keyterms": ["Acme"], "keyterm_detection": {
                "enabled": True, "llm": detector}}) as session:
            await session.start(Agent(instructions="x"))
            await _say(session, "hello")
            await trio.sleep(1)
    assert detector.requests == [] and stt.applied == []
    assert any("does not accept keyterms" in r.getMessage() for r in caplog.records)


async def test_turns_are_forwarded_to_an_stt_that_reads_them(autojump_clock) -> None:
    reads = KeytermSTT(chat_context=True)
    async with _session(reads, {}) as session:
        await session.start(Agent(instructions="x"))
        await _say(session, "hello")
    assert [(i.role, i.text_content) for i in reads.items if i.type == "message"] == [
        ("user", "hello"), ("assistant", "ok")]
    off = KeytermSTT(chat_context=True)
    async with _session(off, {"forward_chat_context": False}) as session:
        await session.start(Agent(instructions="x"))
        await _say(session, "hello")
    assert off.items == []


def test_pending_terms_expire_and_the_cap_drops_the_oldest() -> None:
    static, detected, pending = ["Acme"], [], {}
    n = apply_pass(static, detected, pending, 0, ["Acme", "Bix", "Cor"], ["Dee"], [],
                   max_keyterms=2)
    assert (detected, pending) == (["Dee"], {"Bix": 1, "Cor": 1})
    n = apply_pass(static, detected, pending, n, [], ["Bix", "Eff"], [], max_keyterms=2)
    assert (detected, list(pending)) == (["Bix", "Eff"], ["Cor"])   # Dee evicted
    n = apply_pass(static, detected, pending, n, [], [], ["Bix"], max_keyterms=2)
    assert (detected, pending) == (["Eff"], {"Cor": 1})
    n = apply_pass(static, detected, pending, n, [], [], [], max_keyterms=2)
    assert pending == {}   # Cor unconfirmed for three passes after the one that saw it
    assert n == 4


def test_malformed_answers_count_as_no_change() -> None:
    call = FunctionToolCall(name="record_keyterms", arguments='{"pending": "Zyx", '
                            '"confirm": [1, "Ok", " "]}')
    assert parse_record_keyterms([call]) == ([], ["Ok"], [])
    bad = FunctionToolCall(name="record_keyterms", arguments="{not json")
    assert parse_record_keyterms([bad]) == ([], [], [])
    assert detection_prompt(ChatContext.empty(), []) is None


def test_options_are_checked_and_the_old_name_warns() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        resolve_stt_context({"keyterm": ["x"]})
    with pytest.raises(ValueError, match="timeout"):
        resolve_stt_context({"keyterm_detection": {"timeout": 0}})
    with pytest.raises(TypeError, match="keyterms"):
        resolve_stt_context({"keyterms": "Acme"})
    with pytest.warns(DeprecationWarning, match="stt_context_options"):
        session = AgentSession(keyterms_options={"keyterms": ["Acme"]})
    assert session.keyterms == ["Acme"]
    with pytest.warns(DeprecationWarning):
        session = AgentSession(stt_context_options={"keyterms": ["New"]},
                               keyterms_options={"keyterms": ["Old"]})
    assert session.keyterms == ["New"]
    with pytest.raises(ValueError, match="forward_chat_context"), \
            pytest.warns(DeprecationWarning):
        resolve_stt_context(keyterms_options={"forward_chat_context": True})
    with pytest.raises(TypeError, match="keyterm_detection"):
        AgentSession(stt_context_options={"keyterm_detection": {"llm": 42}})


async def test_the_detection_llms_usage_is_reported(autojump_clock) -> None:
    stt = KeytermSTT()
    detector = DetectionLLM([], delay=0.5)
    reported: list[LLMMetrics] = []
    options: STTContextOptions = {"keyterm_detection": {"enabled": True, "llm": detector}}
    async with _session(stt, options) as session:
        session.on("metrics_collected", lambda ev: reported.append(ev.metrics))
        await session.start(Agent(instructions="x"))
        await _say(session, "hello")
        await trio.sleep(1)
        [usage] = [u for u in session.usage.model_usage if u.model == "detector-1"]
    [metrics] = [m for m in reported if m.request_id == "kt-1"]
    assert (metrics.prompt_tokens, metrics.completion_tokens) == (50, 8)
    assert metrics.duration == pytest.approx(0.5) and metrics.ttft == pytest.approx(0.5)
    assert (usage.input_tokens, usage.output_tokens) == (50, 8)


async def test_an_agents_new_stt_gets_the_keyterms(autojump_clock) -> None:
    first, second = KeytermSTT(), KeytermSTT()
    async with _session(first, {"keyterms": ["Acme"]}) as session:
        agent = Agent(instructions="x")
        await session.start(agent)
        agent.update_options(stt=second)
        assert second.applied == [["Acme"]]
        session.update_options(keyterms=["Bix"])
    assert first.applied == [["Acme"]] and second.applied == [["Acme"], ["Bix"]]


async def test_each_agent_binds_its_own_stt(autojump_clock) -> None:
    own = KeytermSTT()

    class Other(Agent):
        def __init__(self) -> None:
            super().__init__(instructions="y", stt=own)

    shared = KeytermSTT()
    async with _session(shared, {"keyterms": ["Acme"]}) as session:
        await session.start(Agent(instructions="x"))
        session.update_agent(Other())
        await trio.sleep(1)
        assert own.applied == [["Acme"]]
        session.update_options(keyterms=["Bix"])
    assert shared.applied == [["Acme"]] and own.applied[-1] == ["Bix"]
