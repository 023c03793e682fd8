"""Whole sessions on LiveKit plugins (fakes on LiveKit's base classes) through the adapters,
in virtual time."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from livekit import rtc
from lk_fakes import (
    FakePluginLLM,
    FakePluginRealtimeModel,
    FakePluginSTT,
    FakePluginTTS,
    FakePluginVAD,
)

from agents_trio import Agent, AgentSession, FunctionCall, RunContext, function_tool, open_bridge
from agents_trio.io.audio import AudioInput
from agents_trio.plugins import RealtimeModelAdapter, adapt
from agents_trio.realtime import (
    GenerationCreatedEvent,
    InputSpeechStartedEvent,
    InputSpeechStoppedEvent,
    InputTranscriptionCompleted,
    RealtimeSessionClosedError,
)
from agents_trio.testing import FakeAudioOutput

RATE = 24000


class Weather(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You answer weather questions.")

    @function_tool
    async def lookup_weather(self, ctx: RunContext, city: str) -> str:
        """Look up the weather.

        Args:
            city: The city to look up
        """
        return f"sunny in {city}"


async def test_session_run_with_a_plugin_llm_calls_tools(autojump_clock: trio.testing.MockClock
                                                         ) -> None:
    plugin = FakePluginLLM({
        "What's the weather in Paris?": ("tool", "lookup_weather", '{"city": "Paris"}'),
        "sunny in Paris": "It is sunny in Paris."}, ttft=0.3)
    async with open_bridge() as bridge:
        async with AgentSession(llm=adapt(plugin)) as session:
            await session.start(Weather())
            result = await session.run(user_input="What's the weather in Paris?")
        assert bridge.statistics().asyncio_tasks == 0
    result.expect.next_event().is_function_call(name="lookup_weather",
                                                arguments={"city": "Paris"})
    result.expect.next_event().is_function_call_output(output="sunny in Paris")
    result.expect.next_event().is_message(role="assistant")
    result.expect.no_more_events()
    assert [i.type for i in plugin.requests[1]["chat_ctx"].items][-2:] == [
        "function_call", "function_call_output"]


class PacedMic(AudioInput):
    """20 ms frames on Trio's clock: silence, then voice from ``start`` to ``end``."""

    def __init__(self, start: float, end: float, total: float) -> None:
        self.start, self.end, self.total = start, end, total
        self.t = 0.0

    async def __anext__(self) -> rtc.AudioFrame:
        if self.t >= self.total:
            await trio.sleep_forever()
        await trio.sleep(0.02)
        self.t += 0.02
        loud = self.start <= self.t < self.end
        samples = RATE // 50
        data = np.full(samples, 800 if loud else 0, dtype=np.int16)
        return rtc.AudioFrame(data.tobytes(), RATE, 1, samples)


async def test_a_voice_turn_through_plugin_vad_stt_llm_tts(
        autojump_clock: trio.testing.MockClock) -> None:
    llm = FakePluginLLM({"what's the weather": "Sunny all day."}, ttft=0.3)
    tts = FakePluginTTS(ttfb=0.2, seconds_per_char=0.05)
    wall = time.monotonic()
    async with open_bridge() as bridge:
        session = AgentSession(vad=adapt(FakePluginVAD(min_silence=0.3)),
                               stt=adapt(FakePluginSTT("what's the weather")),
                               llm=adapt(llm), tts=adapt(tts))
        session.input.audio = PacedMic(start=0.5, end=1.5, total=8.0)
        session.output.audio = FakeAudioOutput(sample_rate=RATE)
        timeline: list[tuple[str, Any, float]] = []
        t0 = trio.current_time()
        session.on("agent_state_changed", lambda ev: timeline.append(
            ("agent", ev.new_state, round(trio.current_time() - t0, 2))))
        session.on("user_state_changed", lambda ev: timeline.append(
            ("user", ev.new_state, round(trio.current_time() - t0, 2))))
        session.on("user_input_transcribed", lambda ev: timeline.append(
            ("transcript", ev.transcript, round(trio.current_time() - t0, 2))))
        async with session:
            await session.start(Weather())
            await trio.sleep(7.0)
        assert bridge.statistics().asyncio_tasks == 0
    assert time.monotonic() - wall < 5, "virtual time must not wait on the wall clock"
    names = [(kind, value) for kind, value, _ in timeline]
    assert names[:5] == [("agent", "listening"), ("user", "speaking"), ("transcript", "what's"),
                         ("transcript", "what's the weather"), ("user", "listening")]
    assert names[-3:] == [("agent", "thinking"), ("agent", "speaking"), ("agent", "listening")]
    at = {(kind, value): t for kind, value, t in timeline}
    # the VAD hears the end of speech 0.3 s after the voice stopped at 1.5 s; the turn ends
    # after the endpointing delay (0.5 s from the last voice); the reply (prepared
    # preemptively from the final transcript) plays 14 chars * 50 ms
    assert at[("user", "speaking")] == pytest.approx(0.5, abs=0.03)
    assert at[("user", "listening")] == pytest.approx(1.8, abs=0.03)
    assert at[("agent", "thinking")] == pytest.approx(2.0, abs=0.03)
    assert at[("agent", "thinking")] < at[("agent", "speaking")]
    assert at[("agent", "listening")] - at[("agent", "speaking")] == pytest.approx(
        len("Sunny all day.") * 0.05, abs=0.1)
    assert tts.texts == ["Sunny all day."]
    assert [m.text_content for m in session.history.messages() if m.role != "system"] == [
        "what's the weather", "Sunny all day."]


async def test_realtime_adapter_maps_calls_and_events(autojump_clock: trio.testing.MockClock
                                                      ) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        adapter = RealtimeModelAdapter(model)
        assert adapter.capabilities.turn_detection and adapter.capabilities.audio_output
        async with adapter.session() as rt:
            [lk] = model.sessions
            await rt.update_instructions("be brief")
            for _ in range(5):
                rt.push_audio(rtc.AudioFrame(bytes(480), RATE, 1, 240))
            rt.commit_audio()
            t0 = trio.current_time()
            gen = await rt.generate_reply(instructions="greet")
            assert trio.current_time() - t0 == pytest.approx(0.2)
            assert isinstance(gen, GenerationCreatedEvent) and gen.user_initiated
            [message] = [m async for m in gen.message_stream]
            assert message.modalities == ["audio", "text"]
            assert [t async for t in message.text_stream] == ["hello", " from", " realtime"]
            assert len([f async for f in message.audio_stream]) == 2
            assert [c async for c in gen.function_stream] == []

            bridge.call_soon(lk.server_turn)
            events = rt.events()
            assert isinstance(await events.__anext__(), InputSpeechStartedEvent)
            assert isinstance(await events.__anext__(), InputSpeechStoppedEvent)
            transcript = await events.__anext__()
            assert isinstance(transcript, InputTranscriptionCompleted)
            assert transcript.transcript == "hi there"
            server_gen = await events.__anext__()  # the user-initiated one was not repeated
            assert isinstance(server_gen, GenerationCreatedEvent)
            assert not server_gen.user_initiated
            [call] = [c async for c in server_gen.function_stream]
            assert isinstance(call, FunctionCall) and call.name == "lookup"
            rt.interrupt()
            await bridge.run_sync(lambda: None)
        assert lk.closed
        assert [name for name, _ in lk.calls] == [
            "update_instructions", "commit_audio", "generate_reply", "interrupt"]
        assert dict(lk.calls)["commit_audio"] == 5  # audio and commit arrived in order
        with pytest.raises(RealtimeSessionClosedError):
            rt.push_audio(rtc.AudioFrame(bytes(480), RATE, 1, 240))
        assert bridge.statistics().asyncio_tasks == 0


async def test_session_run_on_a_plugin_realtime_model(autojump_clock: trio.testing.MockClock
                                                      ) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        async with AgentSession(llm=adapt(model)) as session:
            await session.start(Weather())
            result = await session.run(user_input="hi")
        assert bridge.statistics().asyncio_tasks == 0
    result.expect.next_event().is_message(role="assistant")
    [lk] = model.sessions
    names = [name for name, _ in lk.calls]
    assert "generate_reply" in names and lk.closed
    assert any(m.role == "assistant" and m.text_content == "hello from realtime"
               for m in session.history.messages())


async def test_a_plugin_response_whose_streams_never_end_fails_after_the_stall_timeout(
        autojump_clock: trio.testing.MockClock) -> None:
    """Issue 15 item 20, through the bridge: the provider never ends the response's streams."""
    from agents_trio import RealtimeResponseStalledError

    model = FakePluginRealtimeModel()
    errors: list[tuple[float, object]] = []
    with pytest.raises(ValueError, match="response_stall_timeout"):
        RealtimeModelAdapter(model, response_stall_timeout=-1)
    async with open_bridge() as bridge:
        session = AgentSession(llm=RealtimeModelAdapter(model, response_stall_timeout=4.0))
        session.on("error", lambda ev: errors.append((trio.current_time(), ev.error)))
        async with session:
            await session.start(Weather())
            [lk] = model.sessions
            lk.stall = True
            t0 = trio.current_time()
            handle = session.generate_reply(instructions="greet")
            with trio.fail_after(10):
                await handle.wait_for_playout()
            assert session.agent_state == "listening"
        assert bridge.statistics().asyncio_tasks == 0
    [(at, error)] = errors
    assert isinstance(error, RealtimeResponseStalledError)
    # the response came 0.2 s after the request, its last item (the second audio frame)
    # 0.2 s later; then nothing for the stall timeout
    assert at - t0 == pytest.approx(0.4 + 4.0, abs=0.05)
    assert any(m.role == "assistant" and m.text_content == "hello from realtime"
               for m in session.history.messages())
