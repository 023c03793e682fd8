"""A LiveKit realtime plugin's ``metrics_collected`` (its ``RealtimeModelMetrics`` when a
response is done) comes out of the adapted session as this runtime's record, field by field,
and a whole session counts it in its usage."""

from __future__ import annotations

import pytest
import trio

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

import msgspec
from livekit.agents import metrics as lk_metrics
from lk_fakes import FakePluginRealtimeModel

from agents_trio import Agent, AgentSession, open_bridge
from agents_trio.metrics import RealtimeModelMetrics
from agents_trio.plugins import RealtimeModelAdapter, adapt


def _lk_record() -> lk_metrics.RealtimeModelMetrics:
    return lk_metrics.RealtimeModelMetrics(
        label="lk.rt", request_id="resp_9", timestamp=1.0, duration=1.5, ttft=0.4,
        cancelled=True, input_tokens=40, output_tokens=20, total_tokens=60,
        tokens_per_second=13.3, session_duration=12.0, acquire_time=0.2,
        input_token_details=lk_metrics.RealtimeModelMetrics.InputTokenDetails(
            audio_tokens=30, text_tokens=10, cached_tokens=8,
            cached_tokens_details=lk_metrics.RealtimeModelMetrics.CachedTokenDetails(
                audio_tokens=6, text_tokens=2)),
        output_token_details=lk_metrics.RealtimeModelMetrics.OutputTokenDetails(
            text_tokens=5, audio_tokens=15),
        metadata=lk_metrics.base.Metadata(model_name="rt-1", model_provider="lk"))


async def test_the_plugin_record_comes_out_of_the_session_events(autojump_clock) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge, RealtimeModelAdapter(model).session() as rt:
        [lk] = model.sessions
        bridge.call_soon(lk.emit, "metrics_collected", _lk_record())
        ours = await rt.events().__anext__()
    assert isinstance(ours, RealtimeModelMetrics)
    expected = _lk_record().model_dump(exclude={"timestamp", "type"})
    got = msgspec.to_builtins(ours)
    assert {k: got[k] for k in expected} == expected


async def test_a_session_counts_the_plugin_record(autojump_clock) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        async with AgentSession(llm=adapt(model)) as session:
            await session.start(Agent(instructions="x"))
            await session.run(user_input="hi")
            [lk] = model.sessions
            bridge.call_soon(lk.emit, "metrics_collected", _lk_record())
            await trio.sleep(0.5)
            [usage] = [u for u in session.usage.model_usage if u.model == "rt-1"]
    assert (usage.input_tokens, usage.input_cached_audio_tokens, usage.output_audio_tokens,
            usage.session_duration) == (40, 6, 15, 12.0)
