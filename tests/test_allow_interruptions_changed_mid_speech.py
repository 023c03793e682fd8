"""``SpeechHandle.allow_interruptions`` set to False while the user's voice has paused the
speech (a possible false interruption), then the user's final transcript.

The final transcript turned the pause into an interruption without asking the speech: the
interruption raised inside the STT stream (the stream failed, an ``error`` event was emitted),
and the speech stayed paused until the false-interruption timer ran out. As in LiveKit, a
pause is valid only while its speech allows interruptions: once it disallows them, the pause
is undone and the speech plays on.
"""

from __future__ import annotations

import trio

from agents_trio import Agent
from agents_trio.testing import FakeActions, create_session


async def test_a_speech_that_disallows_interruptions_while_paused_plays_on(
        autojump_clock) -> None:
    a = FakeActions()
    a.add_tts(5.0, input="A long speech.")
    # the voice pauses the speech at 1.5 (min_duration 0.5); the final transcript is at 2.2
    a.add_user_speech(1.0, 2.0, "wait a second", stt_delay=0.2)
    session = create_session(a, can_pause_audio=True)
    errors: list[object] = []
    session.on("error", errors.append)
    states: list[tuple[float, str]] = []
    said: list[tuple[str | None, bool]] = []
    session.on("conversation_item_added", lambda ev: said.append(
        (ev.item.text_content, ev.item.interrupted)) if ev.item.type == "message" else None)
    async with session:
        await session.start(Agent(instructions="You talk."))
        t0 = trio.current_time()
        session.on("agent_state_changed", lambda ev: states.append(
            (trio.current_time() - t0, ev.new_state)))
        handle = session.say("A long speech.")
        session.input.audio.push(0.1)
        await trio.sleep(1.7)
        assert states[-1][1] == "listening"   # paused by the user's voice
        handle.allow_interruptions = False
        with trio.fail_after(20):
            await handle
        await trio.sleep(3)
    assert errors == []
    assert not handle.interrupted
    assert said == [("A long speech.", False)]
    resumed_at = next(t for t, state in states if t > 1.7 and state == "speaking")
    assert resumed_at <= 2.2, states   # not held until the false-interruption timeout (4.5)
