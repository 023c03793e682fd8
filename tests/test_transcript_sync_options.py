"""The switches LiveKit gives over transcript synchronization: ``TextOutputOptions(
sync_transcription=False)`` sends the agent's transcription as it is generated instead of in
step with the audio, and ``use_tts_aligned_transcript`` (agent, else session; off unless
``True``) decides whether the TTS's word timestamps pace the words."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

import numpy as np
import pytest
import trio
from livekit import rtc

from agents_trio import Agent, AgentSession
from agents_trio.io.audio import TextOutput
from agents_trio.io.room_options import TextOutputOptions
from agents_trio.io.transcript_sync import TIMED_TRANSCRIPT_KEY, TimedWord
from agents_trio.testing import FakeActions, FakeAudioOutput, FakeLLM, FakeTTS

TEXT = "one two three four five six seven eight"


class Recorded(TextOutput):
    def __init__(self, *, synchronized: bool = True) -> None:
        self.synchronized = synchronized
        self.captures: list[tuple[float, str]] = []

    async def capture_text(self, text: str) -> None:
        self.captures.append((trio.current_time(), text))


async def _say(agent: Agent, out: Recorded, **session_options: object) -> float:
    a = FakeActions()
    a.add_tts(4.0, input=TEXT, ttfb=0.1, duration=0.2)
    session = AgentSession(llm=FakeLLM([]), tts=FakeTTS(a.tts_responses), **session_options)
    session.output.audio = FakeAudioOutput()
    session.output.transcription = out
    async with session:
        await session.start(agent)
        t0 = trio.current_time()
        await session.say(TEXT)
        await trio.sleep(1)
    return t0


async def test_unsynchronized_transcription_is_sent_as_generated(autojump_clock) -> None:
    out = Recorded(synchronized=False)
    t0 = await _say(Agent(instructions="Speak."), out)
    assert "".join(text for _, text in out.captures) == TEXT
    assert max(t for t, _ in out.captures) - t0 < 1.0  # not spread over the 4 s of audio


async def test_synchronized_transcription_follows_the_audio(autojump_clock) -> None:
    out = Recorded()
    t0 = await _say(Agent(instructions="Speak."), out)
    assert "".join(text for _, text in out.captures) == TEXT
    assert max(t for t, _ in out.captures) - t0 > 3.0


def test_text_output_options_take_sync_transcription() -> None:
    assert TextOutputOptions(sync_transcription=False).sync_transcription is False
    assert TextOutputOptions(sync_transcription=True).sync_transcription is True


class Stamped(Agent):
    """Its TTS says "two" starts 3.5 s into the 4 s of audio."""

    async def tts_node(self, text: AsyncIterable[str], model_settings: object
                       ) -> AsyncIterator[rtc.AudioFrame]:
        async for _ in text:
            pass
        for i in range(40):
            frame = rtc.AudioFrame(np.zeros(2400, np.int16).tobytes(), 24000, 1, 2400)
            if i == 0:
                frame.userdata[TIMED_TRANSCRIPT_KEY] = [TimedWord(text="one", start_time=0.0),
                                                        TimedWord(text="two", start_time=3.5)]
            yield frame


def _released_at(out: Recorded, t0: float, word: str) -> float:
    text = ""
    for t, part in out.captures:
        text += part
        if word in text:
            return t - t0
    raise AssertionError(f"{word!r} never released: {text!r}")


@pytest.mark.parametrize(("agent_option", "session_option", "aligned"), [
    (None, None, False), (True, None, True), (None, True, True), (False, True, False)])
async def test_tts_timestamps_pace_the_words_only_when_asked(
        autojump_clock, agent_option: bool | None, session_option: bool | None,
        aligned: bool) -> None:
    out = Recorded()
    agent = (Stamped(instructions="Speak.") if agent_option is None else
             Stamped(instructions="Speak.", use_tts_aligned_transcript=agent_option))
    options = {} if session_option is None else {"use_tts_aligned_transcript": session_option}
    t0 = await _say(agent, out, **options)
    two = _released_at(out, t0, "two")
    assert (two >= 3.5) is aligned
