"""A session attached to its input's feed (frames pushed in the producer's step) behaves as
one that pulls every frame: the same events at the same times, and a stopped input stops at
once."""

from __future__ import annotations

import re

import trio
from trio.testing import MockClock

from agents_trio import Agent, FunctionToolCall, RunContext, function_tool
from agents_trio.testing import FakeActions, create_session
from agents_trio.testing.fake_io import FakeAudioInput
from timeline import run_recorded

STORY = "Here is a long story for you, about a brave knight and a very patient dragon."


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You answer.")

    @function_tool
    async def get_weather(self, ctx: RunContext, location: str) -> str:
        """Get the weather.

        Args:
            location: The city
        """
        return f"Sunny in {location}."


def _conversation() -> FakeActions:
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "What is the weather in Paris?", stt_delay=0.2)
    a.add_llm("Let me check.", tool_calls=[FunctionToolCall(
        name="get_weather", arguments='{"location": "Paris"}', call_id="call_1")])
    a.add_tts(1.0)
    a.add_llm("It is sunny in Paris.", input="Sunny in Paris.")
    a.add_tts(1.5)
    a.add_user_speech(6.0, 7.0, "Tell me a story.")
    a.add_llm(STORY)
    a.add_tts(6.0)
    a.add_user_speech(9.0, 10.0, "Stop, please.")   # interrupts the story
    a.add_llm("Sure.")
    a.add_tts(0.5)
    return a


_IDS = re.compile(r"\b(speech|item|call|msg|turn|lk)_[0-9a-zA-Z_]+")


async def _timeline(attachable: bool) -> str:
    session = create_session(_conversation())
    session.input.audio = FakeAudioInput(attachable=attachable)
    rec = await run_recorded(session, Desk())
    return _IDS.sub(r"\1_*", rec.dump())   # ids are random; everything else must match


def _run_on_fresh_clock(attachable: bool) -> str:
    return trio.run(_timeline, attachable, clock=MockClock(autojump_threshold=0))


def test_pushed_and_pulled_frames_give_the_same_timeline():
    pushed = _run_on_fresh_clock(True)
    pulled = _run_on_fresh_clock(False)
    assert "get_weather" in pushed and "interrupted=True" in pushed
    assert pushed == pulled


async def test_a_session_takes_pushed_frames_and_stops_taking_them_when_it_closes(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "Hello there.")
    a.add_llm("Hi!")
    a.add_tts(0.5)
    session = create_session(a)
    audio = session.input.audio
    assert isinstance(audio, FakeAudioInput) and audio.feed is not None
    async with session:
        await session.start(Desk())
        assert audio.feed.consumer is not None      # attached: nothing is pulled
        audio.push(0.1)
        await trio.sleep(5)
        assert [m.text_content for m in session.history.items
                if getattr(m, "role", None) == "user"] == ["Hello there."]
        await session.aclose()
    assert audio.feed.consumer is None              # detached with the session
    audio.push(0.1)                                 # a frame after close is only buffered
    assert audio.feed.receive_nowait() is not None
