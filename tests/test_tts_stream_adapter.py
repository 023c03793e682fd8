"""``tts.StreamAdapter``: a TTS fed sentence by sentence while the text still streams in;
``SynthesizedAudio`` yielded by a ``tts_node`` is played; LiveKit's capability classes."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from livekit import rtc

from agents_trio import Agent, AgentSession, ModelSettings
from agents_trio.stt import STTCapabilities
from agents_trio.testing import FakeActions, FakeAudioOutput, FakeLLM, FakeTTS
from agents_trio.tts import StreamAdapter, SynthesizedAudio, TTSCapabilities

lk_tts = pytest.importorskip("livekit.agents.tts")
lk_stt = pytest.importorskip("livekit.agents.stt")


class WholeTextTTS:
    """Synthesizes only once its text ended (a non-streaming TTS); records each request and
    when, relative to the text, it started."""

    sample_rate = 16000
    num_channels = 1

    def __init__(self) -> None:
        self.requests: list[str] = []

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]
                     ) -> AsyncIterator[AsyncIterable[rtc.AudioFrame]]:
        whole = "".join([t async for t in text])
        self.requests.append(whole)

        async def frames() -> AsyncIterator[rtc.AudioFrame]:
            yield rtc.AudioFrame(bytes(320 * len(whole)), 16000, 1, 160 * len(whole))
        yield frames()


async def test_sentences_are_synthesized_as_they_complete(autojump_clock) -> None:
    inner = WholeTextTTS()
    adapter = StreamAdapter(tts=inner)
    text_send, text_recv = trio.open_memory_channel[str](10)
    heard: list[int] = []

    async def reader(audio: AsyncIterable[rtc.AudioFrame]) -> None:
        async for frame in audio:
            heard.append(frame.samples_per_channel)

    async with adapter.stream(text_recv) as audio, trio.open_nursery() as nursery:
        nursery.start_soon(reader, audio)
        await text_send.send("The first sentence is long enough. ")
        await text_send.send("And the second one is ")
        await trio.testing.wait_all_tasks_blocked()
        # the first sentence was spoken while the text was still open
        assert inner.requests == ["The first sentence is long enough."]
        await text_send.send("still coming.")
        await text_send.aclose()
    assert inner.requests == ["The first sentence is long enough.",
                              "And the second one is still coming."]
    assert heard == [160 * len(r) for r in inner.requests]
    assert adapter.capabilities == TTSCapabilities(streaming=True)
    assert (adapter.sample_rate, adapter.num_channels) == (16000, 1)


def test_the_adapter_checks_what_it_is_given() -> None:
    with pytest.raises(TypeError, match="wraps a TTS"):
        StreamAdapter(tts=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="text_pacing"):
        StreamAdapter(tts=WholeTextTTS(), text_pacing=True)


def test_capability_classes_have_livekits_fields_and_defaults() -> None:
    for ours, theirs in ((STTCapabilities, lk_stt.STTCapabilities),
                         (TTSCapabilities, lk_tts.TTSCapabilities),
                         (SynthesizedAudio, lk_tts.SynthesizedAudio)):
        assert [(f.name, f.default) for f in dataclasses.fields(ours)] == [
            (f.name, f.default) for f in dataclasses.fields(theirs)]
    with pytest.raises(ValueError, match="aligned_transcript"):
        STTCapabilities(streaming=True, interim_results=True,
                        aligned_transcript="sentence")  # type: ignore[arg-type]


class WrappingAgent(Agent):
    """A LiveKit-style tts_node yielding SynthesizedAudio."""

    async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                       ) -> AsyncIterator[object]:
        async for frame in Agent.default.tts_node(self, text, model_settings):
            yield SynthesizedAudio(frame=frame, request_id="r1")


class CountingOutput(FakeAudioOutput):
    def __init__(self) -> None:
        super().__init__()
        self.captured = 0.0

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        self.captured += frame.duration
        await super().capture_frame(frame)


async def test_synthesized_audio_from_a_tts_node_is_played(autojump_clock) -> None:
    a = FakeActions()
    a.add_llm("Hello there.", input="hi")
    a.add_tts(1.0, input="Hello there.")
    output = CountingOutput()
    session = AgentSession(llm=FakeLLM(a.llm_responses), tts=FakeTTS(a.tts_responses))
    session.output.audio = output
    async with session:
        await session.start(WrappingAgent(instructions="x"))
        await session.run(user_input="hi")
    assert output.captured == pytest.approx(1.0, abs=0.05)
