"""The trailing user turn at close (issue 15, item 6; reference §8 step 7).

When the session closes while the user's turn is still being transcribed (the VAD hears
speech, an interim transcript waits for its final, or speech ended with no final yet), close
pushes silence to flush the STT and waits at most ``session_close_transcript_timeout`` (2.0 s,
LiveKit's default) for the final transcript. The turn is committed as a user message and not
answered. With nothing pending, close does not wait.
"""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeAudioInput, FakeLLM, FakeLLMResponse
from recognition_fakes import ManualRecognizer, final, interim, vad_event


def _session(vad: ManualRecognizer | None, stt: ManualRecognizer, **kwargs) -> AgentSession:
    llm = FakeLLM([FakeLLMResponse(input="one more thing", content="sure")])
    session = AgentSession(vad=vad, stt=stt, llm=llm, aec_warmup_duration=None,
                           user_away_timeout=None, **kwargs)
    session.input.audio = FakeAudioInput()
    return session


def _users(session: AgentSession) -> list[str]:
    return [i.text_content for i in session.history.items if getattr(i, "role", "") == "user"]


async def _close_after(session: AgentSession, at: float, send) -> float:
    """Close the session; ``send()`` runs ``at`` seconds after close began. Returns how long
    ``aclose()`` took."""
    async with trio.open_nursery() as nursery:
        async def later() -> None:
            await trio.sleep(at)
            send()

        nursery.start_soon(later)
        started = trio.current_time()
        await session.aclose()
        took = trio.current_time() - started
        nursery.cancel_scope.cancel()
    return took


async def test_a_final_transcript_arriving_during_close_is_committed(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt)
    transcripts: list[tuple[str, bool]] = []
    session.on("user_input_transcribed", lambda e: transcripts.append((e.transcript, e.is_final)))
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            vad.current.send(vad_event("end_of_speech", speech=1.0, silence=0.5))
            stt.current.send(interim("one more"))
            await trio.sleep(0.1)
            took = await _close_after(session, 0.3, lambda: stt.current.send(
                final("one more thing")))
    assert abs(took - 0.3) < 1e-6
    assert _users(session) == ["one more thing"]
    assert ("one more thing", True) in transcripts
    assert len(session.llm.calls) == 0      # committed, not answered


async def test_close_waits_at_most_the_timeout_then_keeps_the_interim(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            stt.current.send(interim("one more"))
            await trio.sleep(0.1)
            took = await _close_after(session, 10.0, lambda: None)
    assert abs(took - 2.0) < 1e-6
    assert _users(session) == ["one more"]


async def test_the_close_transcript_timeout_is_an_option(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt, session_close_transcript_timeout=0.5)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            await trio.sleep(0.1)
            took = await _close_after(session, 10.0, lambda: None)
    assert abs(took - 0.5) < 1e-6


async def test_close_flushes_the_stt_with_silence(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            await trio.sleep(0.1)
            stream = stt.current
            took = await _close_after(session, 0.2, lambda: stream.send(final("one more thing")))
    assert abs(took - 0.2) < 1e-6
    assert abs(stream.pushed - (0.1 + 2.0)) < 1e-6   # the user's audio, then 2 s of silence
    assert _users(session) == ["one more thing"]


async def test_close_does_not_wait_when_nothing_is_pending(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            stt.current.send(final("one more thing"))
            vad.current.send(vad_event("end_of_speech", speech=1.0, silence=0.5))
            await trio.sleep(0.1)
            took = await _close_after(session, 10.0, lambda: None)
    assert took == 0.0
    assert _users(session) == ["one more thing"]


async def test_a_turn_that_ends_while_closing_is_not_answered(autojump_clock):
    """The VAD's end of speech during the wait does not start a reply."""
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt)
    states: list[str] = []
    session.on("agent_state_changed", lambda ev: states.append(ev.new_state))
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            stt.current.send(final("one more thing"))
            await trio.sleep(0.1)

            def user_stops() -> None:
                vad.current.send(vad_event("end_of_speech", speech=1.0, silence=0.5))

            took = await _close_after(session, 0.3, user_stops)
    assert abs(took - 0.3) < 1e-6
    assert _users(session) == ["one more thing"]
    assert "thinking" not in states     # no reply was scheduled
    assert not [i for i in session.history.items if getattr(i, "role", "") == "assistant"]


async def test_without_a_vad_an_open_interim_is_waited_for(autojump_clock):
    stt = ManualRecognizer()
    session = _session(None, stt)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            stt.current.send(interim("one more"))
            await trio.sleep(0.1)
            took = await _close_after(session, 0.4, lambda: stt.current.send(
                final("one more thing")))
    assert abs(took - 0.4) < 1e-6
    assert _users(session) == ["one more thing"]


async def test_cancelling_aclose_during_the_wait_still_closes_and_keeps_the_words(
        autojump_clock):
    """A caller that gives up on ``aclose()`` (a deadline) must not leave the session half
    closed: leaving ``async with`` then waits forever for a close nobody finishes."""
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt)
    closes: list = []
    session.on("close", closes.append)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            stt.current.send(interim("one more"))
            await trio.sleep(0.1)
            with trio.move_on_after(0.5):
                await session.aclose()
    assert len(closes) == 1
    assert _users(session) == ["one more"]
