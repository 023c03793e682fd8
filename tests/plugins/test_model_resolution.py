"""Models as LiveKit users write them: plugin objects and model strings given to
AgentSession, Agent and AgentTask are resolved when these are constructed; what cannot be a
model fails there, naming the parameter."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="resolving LiveKit models needs livekit-agents")

from livekit import rtc
from livekit.agents import llm as lk_llm
from livekit.agents import stt as lk_stt

import agents_trio
from agents_trio import Agent, AgentSession, AgentTask, RunContext, function_tool
from agents_trio.io.audio import AudioInput
from agents_trio.plugins import (
    LLMAdapter,
    RealtimeModelAdapter,
    STTAdapter,
    TTSAdapter,
    TurnDetectorAdapter,
    VADAdapter,
    adapt,
)
from agents_trio.testing import FakeAudioOutput, FakeLLM
from agents_trio.testing.livekit_fakes import (
    FakePluginLLM,
    FakePluginRealtimeModel,
    FakePluginSTT,
    FakePluginTTS,
    FakePluginVAD,
    tool_call,
)

RATE = 24000


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LIVEKIT_INFERENCE_API_KEY", "LIVEKIT_INFERENCE_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LIVEKIT_API_KEY", "test-key")
    monkeypatch.setenv("LIVEKIT_API_SECRET", "test-secret-long-enough-for-a-jwt-signature!!")


# -- plugin objects are adapted at construction ---------------------------------------------
def test_a_session_adapts_each_kind_of_plugin_it_is_given() -> None:
    llm, stt, tts, vad = FakePluginLLM(), FakePluginSTT(), FakePluginTTS(), FakePluginVAD()
    session = AgentSession(llm=llm, stt=stt, tts=tts, vad=vad)
    assert isinstance(session.llm, LLMAdapter) and session.llm.llm is llm
    assert isinstance(session.stt, STTAdapter) and session.stt.stt is stt
    assert isinstance(session.tts, TTSAdapter) and session.tts.wrapped is tts
    assert isinstance(session.vad, VADAdapter) and session.vad.vad is vad
    assert session.tts.sample_rate == tts.sample_rate


def test_a_realtime_model_is_adapted_as_the_llm() -> None:
    model = FakePluginRealtimeModel()
    session = AgentSession(llm=model)
    assert isinstance(session.llm, RealtimeModelAdapter) and session.llm.model is model
    agent = Agent(instructions="hi", llm=FakePluginRealtimeModel())
    assert isinstance(agent.llm, RealtimeModelAdapter)


def test_agents_and_tasks_adapt_their_models_and_keep_what_is_not_given() -> None:
    agent = Agent(instructions="hi", llm=FakePluginLLM(), tts=FakePluginTTS())
    assert isinstance(agent.llm, LLMAdapter) and isinstance(agent.tts, TTSAdapter)
    assert agent.stt is agents_trio.NOT_GIVEN
    task: AgentTask[None] = AgentTask(instructions="ask", stt=FakePluginSTT())
    assert isinstance(task.stt, STTAdapter)
    assert task.llm is agents_trio.NOT_GIVEN


def test_trio_models_and_adapters_are_kept_as_they_are() -> None:
    trio_llm = FakeLLM()
    adapted = adapt(FakePluginTTS())
    session = AgentSession(llm=trio_llm, tts=adapted)
    assert session.llm is trio_llm and session.tts is adapted


def test_a_batch_stt_is_segmented_by_the_sessions_vad() -> None:
    vad = FakePluginVAD()
    session = AgentSession(stt=FakePluginSTT(streaming=False), vad=vad)
    assert isinstance(session.stt, STTAdapter)
    assert isinstance(session.stt.stt, lk_stt.StreamAdapter)
    with pytest.raises(ValueError, match=r"AgentSession\(stt=.*does not stream: pass a VAD"):
        AgentSession(stt=FakePluginSTT(streaming=False))


class _LiveKitEndOfTurnModel:
    """A turn detector written against LiveKit's protocol (asyncio methods) by a plugin
    package: its class lives in a ``livekit`` module, as livekit-plugins-turn-detector's do."""

    __module__ = "livekit.plugins.example_turn_detector"

    async def unlikely_threshold(self, language: Any) -> float | None:
        return 0.5

    async def supports_language(self, language: Any) -> bool:
        return True

    async def predict_end_of_turn(self, chat_ctx: Any, *, timeout: float | None = None
                                  ) -> float:
        return 0.9


def test_a_livekit_turn_detector_in_turn_handling_is_adapted() -> None:
    detector = _LiveKitEndOfTurnModel()
    session = AgentSession(turn_handling={"turn_detection": detector,
                                          "endpointing": {"min_delay": 0.3}})
    adapted = session.turn_handling_overrides["turn_detection"]
    assert isinstance(adapted, TurnDetectorAdapter) and adapted.detector is detector
    assert session.turn_handling_overrides["endpointing"] == {"min_delay": 0.3}
    agent = Agent(instructions="hi", turn_handling={"turn_detection": detector})
    assert isinstance(agent.turn_handling["turn_detection"], TurnDetectorAdapter)


def test_livekits_audio_turn_detector_is_adapted_at_construction(credentials: None) -> None:
    from livekit.agents import inference

    from agents_trio.plugins import AudioTurnDetectorAdapter
    detector = inference.TurnDetector()
    session = AgentSession(turn_handling={"turn_detection": detector})
    adapted = session.turn_handling_overrides["turn_detection"]
    assert isinstance(adapted, AudioTurnDetectorAdapter) and adapted.detector is detector


# -- model strings resolve through the inference gateway ------------------------------------
def test_model_strings_resolve_to_the_inference_gateways_models(credentials: None) -> None:
    session = AgentSession(llm="openai/gpt-4.1-mini", stt="deepgram/nova-3:en",
                           tts="cartesia/sonic-3:a-voice-id")
    assert isinstance(session.llm, agents_trio.inference.LLM)
    assert (session.llm.model, session.llm.provider) == ("openai/gpt-4.1-mini", "livekit")
    assert isinstance(session.stt, agents_trio.inference.STT)
    assert session.stt.model == "deepgram/nova-3"
    assert session.stt.stt.capabilities.streaming
    assert isinstance(session.tts, agents_trio.inference.TTS)
    assert (session.tts.model, session.tts.voice) == ("cartesia/sonic-3", "a-voice-id")


def test_a_realtime_model_string_gives_a_realtime_model(credentials: None) -> None:
    session = AgentSession(llm="openai/gpt-realtime")
    assert isinstance(session.llm, RealtimeModelAdapter)
    assert isinstance(session.llm.model, lk_llm.RealtimeModel)
    assert session.llm.model.model == "openai/gpt-realtime"


def test_an_agent_resolves_model_strings_too(credentials: None) -> None:
    agent = Agent(instructions="hi", llm="openai/gpt-4.1-mini", tts="cartesia/sonic-3")
    assert isinstance(agent.llm, agents_trio.inference.LLM)
    assert isinstance(agent.tts, agents_trio.inference.TTS) and agent.tts.voice is None


def test_inference_classes_take_livekits_parameters(credentials: None) -> None:
    from agents_trio import inference
    llm = inference.LLM("openai/gpt-4.1-mini", extra_kwargs={"temperature": 0.2})
    assert llm.llm.model == "openai/gpt-4.1-mini"
    stt = inference.STT(model="deepgram/nova-3", language="fr", vad=adapt(FakePluginVAD()))
    assert stt.model == "deepgram/nova-3"
    assert inference.TTS("cartesia/sonic-3", voice="v1").voice == "v1"
    vad = inference.VAD(min_silence_duration=0.4)
    assert vad.model == "silero" and vad.min_silence_duration == pytest.approx(0.4)
    session = AgentSession(llm=llm, stt=stt, vad=vad)
    assert session.llm is llm and session.stt is stt and session.vad is vad


def test_a_missing_api_key_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LIVEKIT_API_KEY", "LIVEKIT_API_SECRET", "LIVEKIT_INFERENCE_API_KEY",
                 "LIVEKIT_INFERENCE_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match=r"AgentSession\(llm='openai/gpt-4.1-mini'\).*api_key"):
        AgentSession(llm="openai/gpt-4.1-mini")
    with pytest.raises(ValueError, match=r"Agent\(stt='deepgram/nova-3'\).*api_key"):
        Agent(instructions="hi", stt="deepgram/nova-3")


# -- what is not a model fails at construction ----------------------------------------------
@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"llm": 42}, TypeError, r"AgentSession\(llm=42\): not an LLM model; llm= takes"),
    ({"llm": object()}, TypeError, r"llm= takes a Trio LLM"),
    ({"stt": "nonsense"}, ValueError,
     r"AgentSession\(stt='nonsense'\): 'nonsense' is not a LiveKit inference model string"),
    ({"tts": "/sonic"}, ValueError, r"not a LiveKit inference model string"),
    ({"vad": "silero"}, TypeError, r"AgentSession\(vad='silero'\): a VAD is an object"),
    ({"stt": FakePluginTTS()}, TypeError, r"stt=.*: it is LiveKit's tts.TTS; stt= takes"),
    ({"llm": FakePluginSTT()}, TypeError, r"llm=.*: it is LiveKit's stt.STT"),
    ({"tts": FakeLLM()}, TypeError, r"tts=.*not a TTS model"),
    ({"stt": rtc.AudioFrame(bytes(4), 16000, 1, 2)}, TypeError, r"AudioFrame is not a LiveKit model"),
])
def test_what_is_not_a_model_fails_at_construction(kwargs: dict[str, Any],
                                                   error: type[Exception], message: str
                                                   ) -> None:
    with pytest.raises(error, match=message):
        AgentSession(**kwargs)


def test_an_adapter_given_for_another_kind_is_refused() -> None:
    with pytest.raises(TypeError, match=r"stt=.*it is a VAD model"):
        AgentSession(stt=adapt(FakePluginVAD()))
    with pytest.raises(TypeError, match=r"Agent\(llm=.*it is a TTS model"):
        Agent(instructions="hi", llm=adapt(FakePluginTTS()))


def test_livekit_models_without_livekit_agents_fail_at_construction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import agents_trio.plugins
    monkeypatch.delattr(agents_trio.plugins, "resolve", raising=False)
    monkeypatch.setitem(sys.modules, "agents_trio.plugins.resolve", None)
    with pytest.raises(TypeError, match=r"llm=.*need livekit-agents"):
        AgentSession(llm=FakePluginLLM())
    with pytest.raises(TypeError, match=r"stt=.*need livekit-agents"):
        AgentSession(stt="deepgram/nova-3")


# -- whole sessions on the fakes, given as they are -----------------------------------------
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


async def test_a_text_run_on_plugin_fakes_without_adapt_or_bridge(
        autojump_clock: trio.testing.MockClock) -> None:
    llm = FakePluginLLM({"What's the weather in Paris?": tool_call("lookup_weather",
                                                                   city="Paris"),
                         "sunny in Paris": "It is sunny in Paris."}, ttft=0.3)
    with pytest.raises(agents_trio.BridgeError):
        agents_trio.io.bridge.current_bridge()
    async with AgentSession(llm=llm) as session:
        await session.start(Weather())
        result = await session.run(user_input="What's the weather in Paris?")
    result.expect.next_event().is_function_call(name="lookup_weather",
                                                arguments={"city": "Paris"})
    result.expect.next_event().is_function_call_output(output="sunny in Paris")
    reply = result.expect.next_event().is_message(role="assistant").event().item
    assert reply.text_content == "It is sunny in Paris."
    result.expect.no_more_events()
    assert len(llm.requests) == 2


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
        samples = RATE // 50
        level = 800 if self.start <= self.t < self.end else 0
        return rtc.AudioFrame(np.full(samples, level, dtype=np.int16).tobytes(), RATE, 1,
                              samples)


async def test_a_voice_turn_on_plugin_fakes_given_as_they_are(
        autojump_clock: trio.testing.MockClock) -> None:
    stt = FakePluginSTT(["what's the weather in Paris"])
    llm = FakePluginLLM({"what's the weather in Paris": "Sunny all day."}, ttft=0.3)
    tts = FakePluginTTS(ttfb=0.2, seconds_per_char=0.05)
    session = AgentSession(vad=FakePluginVAD(min_silence=0.3), stt=stt, llm=llm, tts=tts)
    session.input.audio = PacedMic(start=0.5, end=1.5, total=8.0)
    output = FakeAudioOutput(sample_rate=RATE)
    session.output.audio = output
    async with session:
        await session.start(Weather())
        await trio.sleep(7.0)
    assert stt.utterances == ["what's the weather in Paris"]
    assert tts.texts == ["Sunny all day."]
    assert [m.text_content for m in session.history.messages() if m.role != "system"] == [
        "what's the weather in Paris", "Sunny all day."]
    assert llm.cancelled == 0 and tts.cancelled == 0


async def test_inside_an_open_bridge_the_session_uses_it_and_opens_none(
        autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents_trio.io import bridge_on_demand

    def no_second_bridge(**kwargs: object) -> object:
        raise AssertionError("the session opened a bridge of its own inside a job's")

    llm = FakePluginLLM({"hi": "hello"}, ttft=0.1)
    async with agents_trio.open_bridge() as bridge:
        monkeypatch.setattr(bridge_on_demand, "open_bridge", no_second_bridge)
        async with AgentSession(llm=llm) as session:
            await session.start(Agent(instructions="hi"))
            await session.run(user_input="hi")
        assert bridge.statistics().sync_calls > 0  # the plugin's stream was opened on it
    assert len(llm.requests) == 1
