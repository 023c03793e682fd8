"""The transcript synchronizer: words released in step with the agent's audio, on virtual
time (the pacing rules, then a session whose transcription output records when it got what)."""

from __future__ import annotations

import math

import trio
from livekit import rtc

from agents_trio import Agent, AgentSession
from agents_trio.io.audio import TextOutput
from agents_trio.io.transcript_sync import (STANDARD_SPEECH_RATE, TIMED_TRANSCRIPT_KEY,
                                            TimedWord, heard_text, next_start, timed_words,
                                            word_starts)
from agents_trio.testing import FakeActions, FakeAudioOutput, FakeLLM, FakeTTS


def test_before_the_audio_is_complete_words_follow_the_standard_rate() -> None:
    starts = word_starts("one two three", audio_duration=10.0, complete=False)
    per_syllable = 1 / STANDARD_SPEECH_RATE
    assert [w for w, _ in starts] == ["one ", "two ", "three"]
    assert [t for _, t in starts] == [0.0, per_syllable, 2 * per_syllable]
    assert heard_text(starts, 0.01, audio_duration=10.0) == "one "
    assert heard_text(starts, per_syllable, audio_duration=10.0) == "one two "
    assert next_start(starts, per_syllable) == 2 * per_syllable


def test_once_complete_the_words_are_spread_over_the_audio() -> None:
    starts = word_starts("one two three four", audio_duration=4.0, complete=True)
    assert [t for _, t in starts] == [0.0, 1.0, 2.0, 3.0]
    # never ahead of the audio synthesized so far
    assert heard_text(starts, 3.5, audio_duration=1.5) == "one two "
    assert next_start(starts, 3.5) == math.inf


def test_tts_word_timestamps_set_the_starts() -> None:
    frame = rtc.AudioFrame(b"\0\0" * 10, 16000, 1, 10)
    frame.userdata[TIMED_TRANSCRIPT_KEY] = [TimedWord(text="one", start_time=0.0),
                                            TimedWord(text="two", start_time=2.5)]
    stamps = timed_words(frame)
    starts = word_starts("one two three", audio_duration=5.0, complete=False, timestamps=stamps)
    assert [t for _, t in starts] == [0.0, 2.5, 2.5 + 1 / STANDARD_SPEECH_RATE]


class TimedTextOutput(TextOutput):
    def __init__(self) -> None:
        self.captures: list[tuple[float, str]] = []
        self.flushes: list[float] = []

    async def capture_text(self, text: str) -> None:
        """Records ``text`` with the time. Cancellation: not a checkpoint."""
        self.captures.append((trio.current_time(), text))

    def flush(self) -> None:
        self.flushes.append(trio.current_time())


TEXT = "one two three four five six seven eight"


async def _speak(interrupt_at: float | None = None) -> tuple[TimedTextOutput, float]:
    a = FakeActions()
    a.add_tts(4.0, input=TEXT, ttfb=0.1, duration=0.2)
    session = AgentSession(llm=FakeLLM([]), tts=FakeTTS(a.tts_responses))
    session.output.audio = FakeAudioOutput()
    out = TimedTextOutput()
    session.output.transcription = out
    async with session:
        await session.start(Agent(instructions="Speak."))
        t0 = trio.current_time()
        handle = session.say(TEXT)
        if interrupt_at is not None:
            await trio.sleep(interrupt_at)
            await session.interrupt()
        await handle
        await trio.sleep(1)
    return out, t0


async def test_the_transcript_is_released_word_by_word_with_the_audio(
        autojump_clock: object) -> None:
    out, t0 = await _speak()
    texts = [t for _, t in out.captures]
    assert "".join(texts) == TEXT
    assert len(texts) >= 6  # word by word, not one block
    times = [t - t0 for t, _ in out.captures]
    assert times == sorted(times)
    # spread over the 4 s of audio (not all at once after it)
    assert times[-1] - times[0] > 2.0
    assert len(out.flushes) == 1 and out.flushes[0] >= t0 + 4.0


async def test_an_interruption_releases_only_what_was_heard_and_ends_the_segment(
        autojump_clock: object) -> None:
    out, t0 = await _speak(interrupt_at=1.5)
    said = "".join(t for _, t in out.captures)
    assert said and TEXT.startswith(said.rstrip()) and len(said) < len(TEXT)
    assert "eight" not in said
    assert len(out.flushes) == 1
