"""Usage and per-turn metrics as LiveKit reports them: the collectors sum what LiveKit's
sum, ``log_metrics`` logs what LiveKit's logs, a session emits ``session_usage_updated``
after each model's metrics and fills ``ChatMessage.metrics`` on both sides of a turn."""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from agents_trio import Agent, ChatChunk
from agents_trio.llm import CompletionUsage
from agents_trio.metrics import (EOUMetrics, LLMMetrics, Metadata, ModelUsageCollector,
                                 STTMetrics, TTSMetrics, UsageCollector, VADMetrics,
                                 log_metrics)
from agents_trio.testing import FakeActions, FakeLLM, create_session
from timeline import near, run_recorded

lk_metrics = pytest.importorskip("livekit.agents.metrics")


def _records(lib: Any) -> list[Any]:
    """The same metrics built with either library's classes."""
    def meta(name: str, provider: str) -> Any:
        return lib.base.Metadata(model_name=name, model_provider=provider)
    common = {"timestamp": 1.0}
    return [
        lib.LLMMetrics(label="l", request_id="r1", duration=1.0, ttft=0.2, cancelled=False,
                       completion_tokens=7, prompt_tokens=30, prompt_cached_tokens=5,
                       cache_creation_tokens=2, reasoning_tokens=1, total_tokens=37,
                       tokens_per_second=7.0, metadata=meta("gpt", "openai"), **common),
        lib.LLMMetrics(label="l", request_id="r2", duration=1.0, ttft=0.2, cancelled=False,
                       completion_tokens=3, prompt_tokens=40, prompt_cached_tokens=0,
                       total_tokens=43, tokens_per_second=3.0, metadata=meta("gpt", "openai"),
                       **common),
        lib.LLMMetrics(label="l", request_id="r3", duration=1.0, ttft=0.2, cancelled=False,
                       completion_tokens=1, prompt_tokens=2, prompt_cached_tokens=0,
                       total_tokens=3, tokens_per_second=1.0, metadata=None, **common),
        lib.TTSMetrics(label="t", request_id="t1", ttfb=0.1, duration=0.5, audio_duration=2.0,
                       cancelled=False, characters_count=25, input_tokens=3, output_tokens=4,
                       streamed=True, metadata=meta("sonic", "cartesia"), **common),
        lib.STTMetrics(label="s", request_id="s1", duration=0.0, audio_duration=3.5,
                       streamed=True, input_tokens=9, output_tokens=2, input_audio_tokens=8,
                       metadata=meta("nova", "deepgram"), **common),
        lib.RealtimeModelMetrics(
            label="rt", request_id="resp_1", duration=2.0, session_duration=30.0, ttft=0.3,
            cancelled=False, input_tokens=100, output_tokens=50, total_tokens=150,
            tokens_per_second=25.0,
            input_token_details=lib.RealtimeModelMetrics.InputTokenDetails(
                audio_tokens=60, text_tokens=35, image_tokens=5, cached_tokens=20,
                cached_tokens_details=lib.RealtimeModelMetrics.CachedTokenDetails(
                    audio_tokens=12, text_tokens=7, image_tokens=1)),
            output_token_details=lib.RealtimeModelMetrics.OutputTokenDetails(
                text_tokens=10, audio_tokens=40),
            metadata=meta("gpt-realtime", "openai"), **common),
        lib.EOUMetrics(end_of_utterance_delay=0.5, transcription_delay=0.2,
                       on_user_turn_completed_delay=0.01, **common),
        lib.VADMetrics(label="v", idle_time=1.0, inference_duration_total=0.1,
                       inference_count=3, **common),
    ]


def test_model_usage_collector_sums_as_livekits() -> None:
    ours, theirs = ModelUsageCollector(), lk_metrics.ModelUsageCollector()
    for record in _records(__import__("agents_trio.metrics").metrics):
        ours(record)
    for record in _records(lk_metrics):
        theirs(record)
    assert ([msgspec.to_builtins(u) for u in ours.flatten()]
            == [u.model_dump() for u in theirs.flatten()])
    first = ours.flatten()[0]
    first.input_tokens = 0  # a copy: the collector's totals are not changed through it
    assert ours.flatten()[0].input_tokens == 70


def test_the_deprecated_usage_collector_sums_as_livekits() -> None:
    with pytest.warns(DeprecationWarning):
        ours = UsageCollector()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = lk_metrics.UsageCollector()
        for record in _records(__import__("agents_trio.metrics").metrics):
            ours.collect(record)
        for record in _records(lk_metrics):
            theirs.collect(record)
        expected = vars(theirs.get_summary())
    summary = ours.get_summary()
    assert vars(summary) == expected
    assert summary.llm_input_tokens == 172 and summary.llm_output_tokens == 61


def test_stt_total_tokens_defaults_to_input_plus_output() -> None:
    assert STTMetrics(input_tokens=2, output_tokens=3).total_tokens == 5
    assert STTMetrics(input_tokens=2, output_tokens=3, total_tokens=9).total_tokens == 9


_LOG_FIELDS = ("ttft", "prompt_tokens", "prompt_cached_tokens", "cache_creation_tokens",
               "completion_tokens", "reasoning_tokens", "tokens_per_second", "ttfb",
               "audio_duration", "end_of_utterance_delay", "transcription_delay",
               "input_tokens", "output_tokens", "total_tokens", "input_audio_tokens",
               "cached_input_tokens", "input_text_tokens", "input_cached_text_tokens",
               "input_image_tokens", "input_cached_image_tokens", "input_cached_audio_tokens",
               "output_text_tokens", "output_audio_tokens", "output_image_tokens",
               "model_name", "model_provider")


def _logged(records: list[logging.LogRecord]) -> list[tuple[str, dict[str, object]]]:
    return [(r.getMessage(), {k: getattr(r, k) for k in _LOG_FIELDS if hasattr(r, k)})
            for r in records]


def test_log_metrics_logs_what_livekits_logs(caplog: pytest.LogCaptureFixture) -> None:
    ours_logger, lk_logger = logging.getLogger("test.ours"), logging.getLogger("test.lk")
    with caplog.at_level(logging.INFO):
        for record in _records(__import__("agents_trio.metrics").metrics):
            log_metrics(record, logger=ours_logger)
        for record in _records(lk_metrics):
            lk_metrics.log_metrics(record, logger=lk_logger)
    ours = _logged([r for r in caplog.records if r.name == "test.ours"])
    theirs = _logged([r for r in caplog.records if r.name == "test.lk"])
    assert ours == theirs and len(ours) == 7  # VAD metrics are not logged


class MeteredLLM(FakeLLM):
    """A FakeLLM that names itself and reports its token usage after each answer."""

    model = "fake-1"
    provider = "fakeco"

    async def _stream(self, resp: Any, tool_choice: Any) -> AsyncIterator[ChatChunk]:
        async for chunk in super()._stream(resp, tool_choice):
            yield chunk
        if resp is not None:
            yield ChatChunk(id="req-1", usage=CompletionUsage(
                prompt_tokens=12, completion_tokens=6, total_tokens=18))


async def test_a_turn_reports_usage_and_fills_both_messages_metrics(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Hello, how are you?", stt_delay=0.2)
    a.add_llm("I'm doing well, thank you!", ttft=0.1, duration=0.3)
    a.add_tts(2.0, ttfb=0.2, duration=0.3)
    session = create_session(a)
    session.llm = MeteredLLM(a.llm_responses)
    seen: list[tuple[str, Any]] = []
    for name in ("metrics_collected", "session_usage_updated"):
        session.on(name, lambda ev, name=name: seen.append((name, ev)))
    rec = await run_recorded(session, Agent(instructions="be nice"))

    names = [name for name, _ in seen]
    kinds = [ev.metrics.type for ev in rec.of("metrics_collected")]
    # each model's metrics are followed by the usage; the end-of-turn metrics are not
    expected = []
    for kind in kinds:
        expected.append("metrics_collected")
        if kind != "eou_metrics":
            expected.append("session_usage_updated")
    assert names == expected and "llm_metrics" in kinds

    llm = next(ev.metrics for ev in rec.of("metrics_collected")
               if ev.metrics.type == "llm_metrics")
    assert isinstance(llm, LLMMetrics)
    assert (llm.prompt_tokens, llm.completion_tokens, llm.total_tokens) == (12, 6, 18)
    assert near(llm.tokens_per_second, 6 / llm.duration) and llm.request_id == "req-1"
    assert llm.label == f"{MeteredLLM.__module__}.MeteredLLM"
    assert llm.metadata == Metadata(model_name="fake-1", model_provider="fakeco")
    tts = next(ev.metrics for ev in rec.of("metrics_collected")
               if ev.metrics.type == "tts_metrics")
    assert isinstance(tts, TTSMetrics) and tts.metadata == Metadata(
        model_name="unknown", model_provider="unknown")

    usage = [ev for name, ev in seen if name == "session_usage_updated"][-1].usage
    assert usage == session.usage
    llm_usage = [u for u in usage.model_usage if u.type == "llm_usage"]
    assert [(u.provider, u.model, u.input_tokens, u.output_tokens) for u in llm_usage] == [
        ("fakeco", "fake-1", 12, 6)]
    tts_usage = [u for u in usage.model_usage if u.type == "tts_usage"]
    assert tts_usage[0].characters_count == len("I'm doing well, thank you!")

    user, assistant = [ev.item for ev in rec.of("conversation_item_added")
                       if ev.item.type == "message"]
    assert near(user.metrics["transcription_delay"], 0.2)
    assert near(user.metrics["end_of_turn_delay"], 0.5)
    assert near(user.metrics["on_user_turn_completed_delay"], 0.0)
    assert near(user.metrics["stopped_speaking_at"] - rec.t0, 2.5)
    assert user.metrics["stt_metadata"] == {"model_name": "unknown",
                                            "model_provider": "unknown"}
    assert near(assistant.metrics["llm_node_ttft"], 0.1)
    assert near(assistant.metrics["tts_node_ttfb"], 0.2)
    # the user stopped at 2.5 s, the end of turn came at 3.0 s, the first audio at 3.2 s
    assert near(assistant.metrics["e2e_latency"], 0.7)
    assert near(assistant.metrics["started_speaking_at"] - rec.t0, 3.2)
    assert assistant.metrics["stopped_speaking_at"] > assistant.metrics["started_speaking_at"]
    assert assistant.metrics["llm_metadata"] == {"model_name": "fake-1",
                                                 "model_provider": "fakeco"}


async def test_the_usage_event_is_built_only_for_a_listener(autojump_clock) -> None:
    """``session_usage_updated`` carries a copy of every model's totals: with no listener
    it is not built, and a listener that comes later still gets it with the whole totals."""
    from agents_trio.usage import SessionUsage

    class Sink:
        def __init__(self) -> None:
            self.listening = False
            self.emitted: list[str] = []

        def emit(self, name: str, event: object) -> None:
            self.emitted.append(name)

        def wanted(self, name: str) -> bool:
            return self.listening or name != "session_usage_updated"

    sink = Sink()
    usage = SessionUsage(sink)
    record = TTSMetrics(label="t", request_id="r", timestamp=1.0, ttfb=0.1, duration=0.2,
                        audio_duration=1.0, cancelled=False, characters_count=5,
                        streamed=True, metadata=Metadata(model_name="m", model_provider="p"))
    usage.report(record)
    assert sink.emitted == ["metrics_collected"]
    sink.listening = True
    usage.report(record)
    assert sink.emitted == ["metrics_collected", "metrics_collected", "session_usage_updated"]
    assert [u.characters_count for u in usage.usage.model_usage] == [10]   # both counted


async def test_a_say_reports_no_llm_figures(autojump_clock) -> None:
    a = FakeActions()
    a.add_tts(1.0, input="Welcome!")
    session = create_session(a)

    class Greeter(Agent):
        async def on_enter(self) -> None:
            self.session.say("Welcome!")

    rec = await run_recorded(session, Greeter(instructions="x"))
    said = [ev.item for ev in rec.of("conversation_item_added")
            if ev.item.type == "message" and ev.item.role == "assistant"]
    assert said and "llm_node_ttft" not in said[0].metrics
    assert "e2e_latency" not in said[0].metrics and "tts_node_ttfb" in said[0].metrics
    assert not [ev for ev in rec.of("metrics_collected") if ev.metrics.type == "llm_metrics"]


def test_end_of_turn_metrics_have_livekits_metadata_field() -> None:
    assert EOUMetrics().metadata is None and VADMetrics(label="v").label == "v"
