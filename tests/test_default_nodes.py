"""``Agent.default``: LiveKit's static default nodes, called with the agent, for an
override that wraps the default; ``realtime_audio_output_node`` sees a realtime model's
audio before it is played."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

import trio
from livekit import rtc

from agents_trio import Agent, AgentSession, ChatContext, ModelSettings
from agents_trio.testing import (FakeActions, FakeAudioInput, FakeAudioOutput, FakeLLM,
                                 FakeRealtimeModel)


class Shouting(Agent):
    """Wraps the default LLM node through ``Agent.default`` and upper-cases the text."""

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings
                       ) -> AsyncIterator[object]:
        async for chunk in Agent.default.llm_node(self, chat_ctx, tools, model_settings):
            content = getattr(chunk, "content", None)
            yield content.upper() if isinstance(content, str) else chunk

    async def transcription_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                                 ) -> AsyncIterator[str]:
        async for delta in Agent.default.transcription_node(self, text, model_settings):
            yield delta


async def test_an_override_wraps_the_default_llm_node(autojump_clock) -> None:
    a = FakeActions()
    a.add_llm("quiet words", input="hi")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Shouting(instructions="x"))
        result = await session.run(user_input="hi")
    msg = result.expect.next_event().is_message(role="assistant").event().item
    assert msg.text_content == "QUIET WORDS"


def test_the_default_nodes_are_static_functions_of_the_agent() -> None:
    for name in ("stt_node", "llm_node", "tts_node", "transcription_node",
                 "realtime_audio_output_node"):
        assert callable(getattr(Agent.default, name))
    assert Agent(instructions="x").default is Agent.default


class HalfVolume(Agent):
    """Counts the realtime model's frames on their way to the output."""

    def __init__(self) -> None:
        super().__init__(instructions="x")
        self.frames = 0

    async def realtime_audio_output_node(self, audio: AsyncIterable[rtc.AudioFrame],
                                         model_settings: ModelSettings
                                         ) -> AsyncIterator[rtc.AudioFrame]:
        async for frame in Agent.default.realtime_audio_output_node(self, audio,
                                                                    model_settings):
            self.frames += 1
            yield frame


async def test_realtime_audio_goes_through_the_realtime_audio_output_node(autojump_clock):
    model = FakeRealtimeModel().add_response("hello", "Hi there!", audio_duration=1.0)
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    agent = HalfVolume()
    async with session:
        await session.start(agent)
        with trio.fail_after(10):
            await session.run(user_input="hello")
    assert agent.frames > 0
    finished = session.output.audio.playback_finished_events
    assert finished and abs(finished[-1].playback_position - 1.0) < 1e-6
