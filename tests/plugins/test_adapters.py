"""LiveKit Agents plugins as Trio models, proven with fake plugins built on LiveKit's own base
classes. Everything runs in virtual time: the plugins' ``asyncio.sleep`` follows Trio's
MockClock through the bridge, so the timings below are exact."""

from __future__ import annotations

import numpy as np
import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from livekit import rtc
from livekit.agents import APIError as LKAPIError
from livekit.agents import APIStatusError
from livekit.agents import llm as lk_llm
from lk_fakes import NO_RETRY, FakePluginLLM, FakePluginSTT, FakePluginTTS, FakePluginVAD

import agents_trio
from agents_trio import (
    APIError,
    ChatContext,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    SpeechEventType,
    VADEventType,
    function_tool,
    open_bridge,
)
from agents_trio.plugins import LLMAdapter, STTAdapter, TTSAdapter, VADAdapter, adapt

RATE = 24000


def frame(loud: bool, ms: int = 20) -> rtc.AudioFrame:
    samples = RATE * ms // 1000
    return rtc.AudioFrame(np.full(samples, 800 if loud else 0, dtype=np.int16).tobytes(),
                          RATE, 1, samples)


@function_tool
async def lookup_weather(city: str) -> str:
    """Look up the weather.

    Args:
        city: The city to look up
    """
    return "sunny"


# -- LLM ------------------------------------------------------------------------------------
async def test_llm_streams_converted_chunks_on_trio_time(autojump_clock: trio.testing.MockClock
                                                         ) -> None:
    plugin = FakePluginLLM({"hi": "Hello from the plugin"}, ttft=0.5)
    ctx = ChatContext()
    ctx.add_message(role="system", content="Be nice.")
    ctx.add_message(role="user", content="hi")
    async with open_bridge() as bridge:
        llm = LLMAdapter(plugin)
        t0 = trio.current_time()
        async with llm.chat(chat_ctx=ctx, tools=[lookup_weather], tool_choice="auto") as stream:
            chunks = [c async for c in stream]
        assert trio.current_time() - t0 == pytest.approx(0.5 + 4 * 0.01)
        assert bridge.statistics().asyncio_tasks == 0
    assert "".join(c.content or "" for c in chunks) == "Hello from the plugin"
    # the fake reports a token per word and per chat item: 4 + 2
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 6
    [request] = plugin.requests
    lk_ctx = request["chat_ctx"]
    assert [(i.role, i.text_content) for i in lk_ctx.items] == [
        ("system", "Be nice."), ("user", "hi")]
    assert [i.id for i in lk_ctx.items] == [i.id for i in ctx.items]
    [tool] = request["tools"]
    # a LiveKit FunctionTool, so the plugin builds the schema LiveKit would (strict or not)
    assert isinstance(tool, lk_llm.FunctionTool)
    assert tool.info.name == "lookup_weather"
    [schema] = lk_llm.ToolContext([tool]).parse_function_tools("openai", strict=True)
    assert schema["function"]["parameters"]["properties"]["city"]["description"] == (
        "The city to look up")
    assert request["tool_choice"] == "auto"


async def test_llm_converts_tool_calls_and_their_outputs() -> None:
    plugin = FakePluginLLM({"weather?": ("tool", "lookup_weather", '{"city": "Paris"}')},
                           ttft=0)
    ctx = ChatContext()
    ctx.add_message(role="user", content="weather?")
    async with open_bridge():
        llm = LLMAdapter(plugin)
        async with llm.chat(chat_ctx=ctx, tools=[lookup_weather]) as stream:
            chunk, usage = [c async for c in stream]
        assert usage.usage is not None and not usage.tool_calls
        [call] = chunk.tool_calls
        assert (call.name, call.arguments, call.call_id) == (
            "lookup_weather", '{"city": "Paris"}', "call_1")
        ctx.insert(FunctionCall(call_id="call_1", name="lookup_weather", arguments=call.arguments))
        ctx.insert(FunctionCallOutput(call_id="call_1", name="lookup_weather", output="sunny"))
        async with llm.chat(chat_ctx=ctx, tools=[lookup_weather]) as stream:
            assert not any([c.content or c.tool_calls async for c in stream])
    items = plugin.requests[1]["chat_ctx"].items
    assert [i.type for i in items] == ["message", "function_call", "function_call_output"]
    assert items[2].output == "sunny" and items[2].call_id == "call_1"


async def test_cancelling_the_trio_side_closes_the_llm_stream(
        autojump_clock: trio.testing.MockClock) -> None:
    plugin = FakePluginLLM({}, ttft=0.1, hang=True)
    ctx = ChatContext([ChatMessage(role="user", content=["hi"])])
    async with open_bridge() as bridge:
        with trio.move_on_after(2):
            async with LLMAdapter(plugin).chat(chat_ctx=ctx) as stream:
                async for _ in stream:
                    pass
        assert plugin.cancelled == 1
        assert bridge.statistics().asyncio_tasks == 0


async def test_llm_provider_errors_become_api_errors(autojump_clock: trio.testing.MockClock
                                                      ) -> None:
    failure = APIStatusError("rate limited", status_code=429, retryable=False)
    plugin = FakePluginLLM({}, fail_with=failure)
    ctx = ChatContext([ChatMessage(role="user", content=["hi"])])
    async with open_bridge() as bridge:
        with pytest.raises(APIError, match="rate limited") as info:
            async with LLMAdapter(plugin, conn_options=NO_RETRY).chat(chat_ctx=ctx) as stream:
                async for _ in stream:
                    pass
        assert info.value.__cause__ is failure and not info.value.recoverable
        assert "429" in str(info.value)
        mapped = info.value
        assert isinstance(mapped, agents_trio.APIStatusError)
        assert (mapped.status_code, mapped.retryable) == (429, False)
        assert bridge.statistics().asyncio_tasks == 0


async def test_llm_adapter_without_a_bridge_says_how_to_open_one() -> None:
    llm = LLMAdapter(FakePluginLLM({}))
    with pytest.raises(Exception, match="open_bridge"):
        async with llm.chat(chat_ctx=ChatContext()):
            pass


# -- STT ------------------------------------------------------------------------------------
async def test_stt_events_come_back_converted_and_usage_is_dropped(
        autojump_clock: trio.testing.MockClock) -> None:
    plugin = FakePluginSTT("what's the weather")
    async with open_bridge() as bridge:
        async with STTAdapter(plugin).stream() as stream:
            before = bridge.statistics()
            for loud in [True] * 10 + [False] * 5:
                stream.push_frame(frame(loud))
            stream.end_input()
            events = [ev async for ev in stream]
            after = bridge.statistics()
        assert bridge.statistics().asyncio_tasks == 0
    assert [ev.type for ev in events] == [
        SpeechEventType.START_OF_SPEECH, SpeechEventType.INTERIM_TRANSCRIPT,
        SpeechEventType.FINAL_TRANSCRIPT, SpeechEventType.END_OF_SPEECH]
    final = events[2].alternatives[0]
    assert (final.text, final.confidence, final.language) == ("what's the weather", 0.9, "en")
    assert plugin.frames == 15
    # 15 frames and end_input pushed in a burst: one loop callback carried them all
    assert after.callbacks - before.callbacks == 1
    assert after.fed_items - before.fed_items == 16


async def test_stt_failure_is_raised_by_the_iteration_and_push_never_raises(
        autojump_clock: trio.testing.MockClock) -> None:
    plugin = FakePluginSTT(fail_after_frames=3)
    async with open_bridge() as bridge:
        with pytest.raises(APIError, match="socket closed") as info:
            async with STTAdapter(plugin, conn_options=NO_RETRY).stream() as stream:
                for _ in range(3):
                    stream.push_frame(frame(True))
                await trio.sleep(0.1)
                for _ in range(3):
                    stream.push_frame(frame(True))  # the plugin stream is dead: dropped
                async for _ in stream:
                    pass
        assert isinstance(info.value.__cause__, LKAPIError)
        assert bridge.statistics().asyncio_tasks == 0


async def test_a_non_streaming_stt_needs_a_vad() -> None:
    with pytest.raises(ValueError, match="does not stream"):
        STTAdapter(FakePluginSTT(streaming=False))
    wrapped = adapt(FakePluginSTT(streaming=False), vad=FakePluginVAD())
    assert wrapped.stt.capabilities.streaming


# -- VAD ------------------------------------------------------------------------------------
async def test_vad_events_come_back_converted(autojump_clock: trio.testing.MockClock) -> None:
    async with open_bridge(), VADAdapter(FakePluginVAD(min_silence=0.1)).stream() as stream:
        for loud in [False] * 2 + [True] * 5 + [False] * 6:
            stream.push_frame(frame(loud))
        stream.end_input()
        events = [ev async for ev in stream]
    kinds = [ev.type for ev in events if ev.type is not VADEventType.INFERENCE_DONE]
    assert kinds == [VADEventType.START_OF_SPEECH, VADEventType.END_OF_SPEECH]
    end = next(ev for ev in events if ev.type is VADEventType.END_OF_SPEECH)
    assert end.speech_duration == pytest.approx(0.1)
    assert end.silence_duration == pytest.approx(0.1)
    assert sum(ev.type is VADEventType.INFERENCE_DONE for ev in events) == 13


# -- TTS ------------------------------------------------------------------------------------
async def _text(*parts: str, gap: float = 0.0):
    for part in parts:
        await trio.sleep(gap)
        yield part


@pytest.mark.parametrize("streaming", [True, False])
async def test_tts_synthesizes_the_text_stream(autojump_clock: trio.testing.MockClock,
                                               streaming: bool) -> None:
    plugin = FakePluginTTS(streaming=streaming, ttfb=0.2, seconds_per_char=0.01)
    async with open_bridge() as bridge:
        tts = TTSAdapter(plugin)
        assert (tts.sample_rate, tts.num_channels) == (RATE, 1)
        t0 = trio.current_time()
        async with tts.stream(_text("Hello ", "there.", gap=0.1)) as frames:
            first_at = None
            audio = 0.0
            async for f in frames:
                first_at = first_at or trio.current_time() - t0
                assert f.sample_rate == RATE
                audio += f.duration
        assert bridge.statistics().asyncio_tasks == 0
    assert "".join(plugin.texts).strip() == "Hello there.", plugin.texts
    # LiveKit's audio emitter may pad the end of a segment with a frame or two of silence
    expected = len("Hello there.") * 0.01
    assert expected - 1e-6 <= audio <= expected + 0.03
    if streaming:  # the text ended at 0.2 s, then ttfb
        assert first_at == pytest.approx(0.4)


async def test_cancelling_the_trio_side_closes_the_tts_stream(
        autojump_clock: trio.testing.MockClock) -> None:
    plugin = FakePluginTTS(hang=True, seconds_per_char=0.1)
    async with open_bridge() as bridge:
        got = 0
        with trio.move_on_after(1):
            async with TTSAdapter(plugin).stream(_text("a long sentence")) as frames:
                async for _ in frames:
                    got += 1
        assert got >= 1 and plugin.cancelled == 1
        assert bridge.statistics().asyncio_tasks == 0


async def test_tts_provider_errors_become_api_errors(autojump_clock: trio.testing.MockClock
                                                      ) -> None:
    plugin = FakePluginTTS(fail_with=LKAPIError("voice not found", retryable=False))
    async with open_bridge() as bridge:
        with pytest.raises(APIError, match="voice not found"):
            async with TTSAdapter(plugin, conn_options=NO_RETRY).stream(_text("hi")) as frames:
                async for _ in frames:
                    pass
        assert bridge.statistics().asyncio_tasks == 0


async def test_an_error_in_the_text_stream_reaches_the_caller(
        autojump_clock: trio.testing.MockClock) -> None:
    async def failing_text():
        yield "Hello"
        raise ValueError("the LLM broke")

    async with open_bridge() as bridge:
        with pytest.raises(ValueError, match="the LLM broke"):
            async with TTSAdapter(FakePluginTTS()).stream(failing_text()) as frames:
                async for _ in frames:
                    pass
        assert bridge.statistics().asyncio_tasks == 0


def test_adapt_picks_the_adapter_and_passes_trio_models_through() -> None:
    assert isinstance(adapt(FakePluginLLM({})), LLMAdapter)
    assert isinstance(adapt(FakePluginSTT()), STTAdapter)
    assert isinstance(adapt(FakePluginTTS()), TTSAdapter)
    assert isinstance(adapt(FakePluginVAD()), VADAdapter)
    trio_model = object()
    assert adapt(trio_model) is trio_model and adapt(None) is None
    with pytest.raises(TypeError):
        LLMAdapter(object())  # type: ignore[arg-type]



