"""A realtime response whose streams never close (issue 15 item 20).

The server's end of a response can get lost (a dropped event, a reconnect, a plugin that never
closes a stream). The response then held the agent in "thinking" or "speaking" for good: later
replies queued behind it never reached the model. Now a reconnect or a new turn ends it, and
a response that makes no progress for ``response_stall_timeout`` seconds fails with an
``error`` event.
"""

from __future__ import annotations

import pytest
import trio

from agents_trio import Agent, AgentSession, RealtimeResponseStalledError
from agents_trio.realtime import DEFAULT_RESPONSE_STALL_TIMEOUT
from agents_trio.testing import FakeAudioInput, FakeAudioOutput, FakeRealtimeModel


def _session(model: FakeRealtimeModel) -> AgentSession:
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    return session


class _Recorder:
    """The session's speeches, errors and agent states, with the times they happened."""

    def __init__(self, session: AgentSession) -> None:
        self.speeches: list = []
        self.errors: list[tuple[float, object]] = []
        self.states: list[tuple[float, str]] = []
        session.on("speech_created", lambda ev: self.speeches.append(ev.speech_handle))
        session.on("error", lambda ev: self.errors.append((trio.current_time(), ev.error)))
        session.on("agent_state_changed",
                   lambda ev: self.states.append((trio.current_time(), ev.new_state)))


def _assistant_texts(session: AgentSession) -> list[str]:
    return [i.text_content for i in session.history.items
            if i.type == "message" and i.role == "assistant"]


async def test_a_new_user_turn_ends_a_stalled_response_and_is_answered(autojump_clock):
    model = FakeRealtimeModel(response_stall_timeout=600)  # far away: the turn must end it
    model.add_response("are you there?", "Yes, I am here.", audio_duration=1.0)
    session = _session(model)
    seen = _Recorder(session)
    async with session:
        await session.start(Agent(instructions="You help."))
        rt = model.sessions[0]
        rt.emit_generation("Hello.", audio_duration=0.5, stall=True)
        await trio.sleep(2.0)
        (stalled,) = seen.speeches
        assert not stalled.done()  # played what it got, still waiting for the server
        with trio.fail_after(5):
            result = await session.run(user_input="are you there?")
        assert result.expect[-1].is_message(role="assistant").event().item.text_content == \
            "Yes, I am here."
        assert stalled.done() and rt.call_names().count("generate_reply") == 1
    assert _assistant_texts(session) == ["Hello.", "Yes, I am here."]
    assert seen.errors == []


async def test_a_turn_of_the_server_ends_the_stalled_response_before_it(autojump_clock):
    model = FakeRealtimeModel(response_stall_timeout=600)
    session = _session(model)
    seen = _Recorder(session)
    async with session:
        await session.start(Agent(instructions="You help."))
        rt = model.sessions[0]
        rt.emit_generation("Hello.", audio_duration=0.5, stall=True)
        await trio.sleep(2.0)
        rt.emit_transcription("anyone?")
        rt.emit_generation("Still here.", audio_duration=0.5)
        with trio.fail_after(5):
            while not all(h.done() for h in seen.speeches):
                await trio.sleep(0.1)
    assert _assistant_texts(session) == ["Hello.", "Still here."]


async def test_a_reconnect_ends_a_stalled_response(autojump_clock):
    model = FakeRealtimeModel(response_stall_timeout=600)
    session = _session(model)
    seen = _Recorder(session)
    async with session:
        await session.start(Agent(instructions="You help."))
        rt = model.sessions[0]
        rt.emit_generation("Hello.", audio_duration=0.5, stall=True)
        await trio.sleep(2.0)
        (stalled,) = seen.speeches
        assert not stalled.done()
        rt.emit_reconnected()
        with trio.fail_after(1):
            await stalled.wait_for_playout()
        assert session.agent_state == "listening"
    assert _assistant_texts(session) == ["Hello."]
    assert seen.errors == []


async def test_a_response_without_progress_fails_after_the_stall_timeout(autojump_clock):
    model = FakeRealtimeModel(response_stall_timeout=8.0)
    session = _session(model)
    seen = _Recorder(session)
    async with session:
        await session.start(Agent(instructions="You help."))
        rt = model.sessions[0]
        t0 = trio.current_time()
        rt.emit_generation("Hello.", audio_duration=0.5, stall=True)  # everything at t0
        await trio.sleep(7.0)
        assert seen.errors == [] and session.agent_state != "listening"
        with trio.fail_after(2):
            while session.agent_state != "listening":
                await trio.sleep(0.01)
        (at, error), = seen.errors
        assert at == pytest.approx(t0 + 8.0, abs=0.05)
        assert isinstance(error, RealtimeResponseStalledError) and "8.0 s" in str(error)
        assert error.recoverable  # reported, not counted towards closing the session
        assert seen.states[-1] == (pytest.approx(at, abs=0.05), "listening")
        (stalled,) = seen.speeches
        assert stalled.done()
        # the session goes on: the next turn is answered
        model.add_response("hello?", "Hi.", audio_duration=0.5)
        with trio.fail_after(5):
            await session.run(user_input="hello?")
    assert _assistant_texts(session) == ["Hello.", "Hi."]


def test_the_stall_timeout_has_a_default_and_can_be_disabled() -> None:
    assert FakeRealtimeModel().response_stall_timeout == DEFAULT_RESPONSE_STALL_TIMEOUT > 0
    assert FakeRealtimeModel(response_stall_timeout=None).response_stall_timeout is None
    with pytest.raises(ValueError, match="response_stall_timeout"):
        FakeRealtimeModel(response_stall_timeout=0)


async def test_an_unrecoverable_realtime_error_closes_the_session_at_once(autojump_clock):
    """As LiveKit's session does: a realtime model's unrecoverable error is not counted
    towards ``max_unrecoverable_errors`` (that is for the LLM, STT and TTS, which work again
    on the next request); the session closes with reason ``error`` at the first one, instead
    of staying on with a provider session that gave up."""
    from agents_trio import APIError, CloseReason

    model = FakeRealtimeModel()
    session = _session(model)
    seen = _Recorder(session)
    closes: list[object] = []
    session.on("close", lambda ev: closes.append(ev.reason))
    async with session:
        await session.start(Agent(instructions="You help."))
        model.sessions[0].emit_error(APIError("the provider gave up"), recoverable=False)
        with trio.fail_after(5):
            while not closes:
                await trio.sleep(0.1)
    assert closes == [CloseReason.ERROR]
    assert len(seen.errors) == 1


async def test_a_recoverable_realtime_error_leaves_the_session_answering(autojump_clock):
    from agents_trio import APIError

    model = FakeRealtimeModel()
    model.add_response("still there?", "Yes.", audio_duration=0.5)
    session = _session(model)
    seen = _Recorder(session)
    async with session:
        await session.start(Agent(instructions="You help."))
        for _ in range(5):  # more than max_unrecoverable_errors: recoverable ones are not counted
            model.sessions[0].emit_error(APIError("a hiccup"), recoverable=True)
        with trio.fail_after(5):
            result = await session.run(user_input="still there?")
        assert result.expect[-1].is_message(role="assistant").event().item.text_content == "Yes."
    assert len(seen.errors) == 5
