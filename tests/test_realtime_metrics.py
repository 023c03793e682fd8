"""``RealtimeModelMetrics`` as LiveKit reports them: a realtime session's record of each
finished response reaches ``metrics_collected``, is counted in the session's usage (as an
LLM's, per provider and model) and is followed by ``session_usage_updated``."""

from __future__ import annotations

from typing import Any

import trio

from agents_trio import Agent, AgentSession
from agents_trio.metrics import RealtimeModelMetrics
from agents_trio.testing import FakeAudioInput, FakeAudioOutput, FakeRealtimeModel


class NamedRealtimeModel(FakeRealtimeModel):
    model = "fake-realtime-1"
    provider = "fakeco"


async def test_each_response_reports_its_metrics_and_usage(autojump_clock) -> None:
    model = NamedRealtimeModel()
    model.add_response("hello", "Hi there!", audio_duration=1.0, input_tokens=12,
                       output_tokens=30)
    model.add_response("again", "Hi again!", audio_duration=1.0, input_tokens=20,
                       output_tokens=25)
    events: list[tuple[str, Any]] = []
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    for name in ("metrics_collected", "session_usage_updated"):
        session.on(name, lambda ev, _n=name: events.append((_n, ev)))
    async with session:
        await session.start(Agent(instructions="be brief"))
        await session.run(user_input="hello")
        await session.run(user_input="again")
        await trio.sleep(1)
    realtime = [(i, ev.metrics) for i, (name, ev) in enumerate(events)
                if name == "metrics_collected"
                and isinstance(ev.metrics, RealtimeModelMetrics)]
    assert [(m.input_tokens, m.output_tokens) for _, m in realtime] == [(12, 30), (20, 25)]
    first = realtime[0][1]
    assert first.request_id.startswith("resp") and first.label
    assert first.metadata is not None
    assert (first.metadata.model_name, first.metadata.model_provider) == (
        "fake-realtime-1", "fakeco")
    assert first.ttft == 0.0 and first.input_token_details.text_tokens == 12
    index = realtime[0][0]
    assert events[index + 1][0] == "session_usage_updated"
    [usage] = [u for u in session.usage.model_usage if u.model == "fake-realtime-1"]
    assert usage.type == "llm_usage" and usage.provider == "fakeco"
    assert (usage.input_tokens, usage.output_tokens, usage.output_audio_tokens) == (32, 55, 55)
