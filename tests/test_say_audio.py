"""``session.say(text, audio=frames)``: the given frames are played instead of the TTS's
(as in LiveKit), the text is what the chat context and the transcription get."""

from __future__ import annotations

from collections.abc import AsyncIterator

from livekit import rtc

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, FakeAudioOutput, FakeTextOutput, create_session
from timeline import near, run_recorded


async def _tone(seconds: float, rate: int = 24000) -> AsyncIterator[rtc.AudioFrame]:
    for _ in range(round(seconds / 0.01)):
        yield rtc.AudioFrame.create(rate, 1, rate // 100)


class Recorded(Agent):
    async def on_enter(self) -> None:
        self.session.say("This is a recording.", audio=_tone(1.5))


async def test_the_given_audio_is_played_instead_of_the_tts(autojump_clock) -> None:
    a = FakeActions()
    a.add_tts(4.0, input="This is a recording.")   # what the TTS would have said: unused
    session = create_session(a)
    rec = await run_recorded(session, Recorded(instructions="x"))
    assert session.tts.inputs == []
    finished = session.output.audio.playback_finished_events
    assert len(finished) == 1 and near(finished[0].playback_position, 1.5)
    said = [ev.item for ev in rec.of("conversation_item_added")
            if ev.item.type == "message" and ev.item.role == "assistant"]
    assert [m.text_content for m in said] == ["This is a recording."]
    assert not [ev for ev in rec.of("metrics_collected") if ev.metrics.type == "tts_metrics"]


async def test_say_with_audio_needs_no_tts(autojump_clock) -> None:
    session = AgentSession(aec_warmup_duration=None, user_away_timeout=None)
    session.output.audio = FakeAudioOutput()
    session.output.transcription = FakeTextOutput()
    async with session:
        await session.start(Agent(instructions="x"))
        handle = session.say("Recorded.", audio=_tone(0.5))
        await handle
    finished = session.output.audio.playback_finished_events
    assert len(finished) == 1 and near(finished[0].playback_position, 0.5)
    assert [m.text_content for m in session.history.messages()] == ["Recorded."]
