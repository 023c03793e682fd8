"""``session.input.set_audio_enabled`` and ``session.output.set_audio_enabled`` /
``set_transcription_enabled`` (LiveKit's AgentInput/AgentOutput): push-to-talk stops listening
between turns; a disabled output is left out of the next replies."""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import (FakeAudioInput, FakeAudioOutput, FakeLLM, FakeLLMResponse,
                                 FakeTextOutput, FakeTTS, FakeTTSResponse)
from recognition_fakes import ManualRecognizer, final, vad_event


def _listening_session(vad: ManualRecognizer, stt: ManualRecognizer) -> AgentSession:
    session = AgentSession(vad=vad, stt=stt, llm=FakeLLM([]), aec_warmup_duration=None,
                           user_away_timeout=None,
                           turn_handling={"turn_detection": "manual"})
    session.input.audio = FakeAudioInput()
    return session


async def test_a_disabled_input_drops_its_frames_and_enabling_listens_again(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _listening_session(vad, stt)
    session.input.set_audio_enabled(False)  # before start: push-to-talk waits for a press
    assert not session.input.audio_enabled
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.3)
            await trio.sleep(0.5)
            assert (vad.current.pushed, stt.current.pushed) == (0.0, 0.0)
            session.input.set_audio_enabled(True)
            session.input.audio.push(0.2)
            await trio.sleep(0.5)
            assert round(vad.current.pushed, 3) == round(stt.current.pushed, 3) == 0.2


async def test_disabling_the_input_while_the_user_speaks_ends_their_speech(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _listening_session(vad, stt)
    states: list[str] = []
    session.on("user_state_changed", lambda ev: states.append(ev.new_state))
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            vad.current.send(vad_event("start_of_speech", speech=0.2))
            stt.current.send(final("Book a table"))
            await trio.sleep(0.5)
            assert session.user_state == "speaking"
            session.input.set_audio_enabled(False)  # the button is released
            assert session.user_state == "listening"
            transcript = await session.commit_user_turn(skip_reply=True)
    assert transcript == "Book a table"
    assert states[:2] == ["speaking", "listening"]


async def _reply_with(configure) -> tuple[FakeAudioOutput, FakeTextOutput, str]:
    tts = FakeTTS([FakeTTSResponse(input="Hello!", audio_duration=1.0)])
    session = AgentSession(llm=FakeLLM([FakeLLMResponse(input="hi", content="Hello!")]),
                           tts=tts, aec_warmup_duration=None, user_away_timeout=None)
    audio, text = FakeAudioOutput(), FakeTextOutput()
    session.output.audio, session.output.transcription = audio, text
    configure(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            result = await session.run(user_input="hi")
    reply = [e.item.text_content for e in result.events if e.type == "message"][-1]
    return audio, text, reply


async def test_a_disabled_audio_output_makes_replies_text_only(autojump_clock):
    audio, text, reply = await _reply_with(lambda s: s.output.set_audio_enabled(False))
    assert reply == "Hello!"
    assert audio.playback_finished_events == []   # nothing was played
    assert text.messages == ["Hello!"]


async def test_a_disabled_transcription_output_gets_no_text(autojump_clock):
    audio, text, reply = await _reply_with(lambda s: s.output.set_transcription_enabled(False))
    assert reply == "Hello!"
    assert len(audio.playback_finished_events) == 1
    assert text.messages == []


async def test_both_enabled_is_the_default(autojump_clock):
    audio, text, reply = await _reply_with(lambda s: None)
    assert len(audio.playback_finished_events) == 1 and text.messages == ["Hello!"]
