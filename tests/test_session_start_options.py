"""``session.start(agent, capture_run=True)`` returns the RunResult of the start (what
``on_enter`` said and did), as LiveKit's; ``once`` calls a listener a single time."""

from __future__ import annotations

import pytest
import trio

from agents_trio import Agent, AgentSession, RunResult
from agents_trio.testing import FakeActions, FakeLLM


class Greeter(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Greet the user.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="say hello")


async def test_start_captures_what_on_enter_says(autojump_clock) -> None:
    a = FakeActions()
    a.add_llm("Hello! How can I help?", input="say hello", ttft=0.2, duration=0.5)
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        run = await session.start(Greeter(), capture_run=True)
        assert isinstance(run, RunResult) and not run.done()
        with trio.fail_after(10):
            await run
        run.expect.skip_next_event_if(type="agent_handoff")
        msg = run.expect.next_event().is_message(role="assistant").event().item
        assert msg.text_content == "Hello! How can I help?"
        run.expect.no_more_events()


async def test_start_without_capture_returns_none(autojump_clock) -> None:
    async with AgentSession(llm=FakeLLM([])) as session:
        assert await session.start(Agent(instructions="x")) is None


async def test_a_captured_start_is_done_when_on_enter_says_nothing(autojump_clock) -> None:
    async with AgentSession(llm=FakeLLM([])) as session:
        run = await session.start(Agent(instructions="x"), capture_run=True)
        assert run is not None
        with trio.fail_after(10):
            await run
        assert [e for e in run.events if e.type != "agent_handoff"] == []


async def test_once_calls_the_listener_a_single_time(autojump_clock) -> None:
    a = FakeActions()
    a.add_llm("one", input="first")
    a.add_llm("two", input="second")
    seen: list[str] = []
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        session.once("conversation_item_added", lambda ev: seen.append(ev.item.type))
        await session.start(Agent(instructions="x"))
        await session.run(user_input="first")
        await session.run(user_input="second")
    assert seen == ["agent_handoff"]
    with pytest.raises(ValueError):
        session.once("no_such_event", lambda ev: None)


# -- session.update_options ---------------------------------------------------------------

from agents_trio.testing import create_session  # noqa: E402
from timeline import near, run_recorded  # noqa: E402


def _user_turn_actions() -> FakeActions:
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Hello there")
    a.add_llm("Hi!", input="Hello there")
    a.add_tts(1.0, input="Hi!")
    return a


async def test_a_longer_endpointing_delay_applies_to_the_running_agent(autojump_clock) -> None:
    session = create_session(_user_turn_actions())
    rec = await run_recorded(session, Agent(instructions="x"), script=[
        (0.2, lambda s: s.update_options(endpointing_opts={"min_delay": 2.0}))])
    user = next(ev for ev in rec.of("conversation_item_added")
                if ev.item.type == "message" and ev.item.role == "user")
    assert near(rec.t(user), 4.5)   # 2.0 s after the user stopped (the default was 0.5 s)
    assert session.turn_handling_overrides["endpointing"]["min_delay"] == 2.0


async def test_the_deprecated_delay_names_still_work(autojump_clock) -> None:
    session = create_session(_user_turn_actions())
    rec = await run_recorded(session, Agent(instructions="x"), script=[
        (0.2, lambda s: s.update_options(min_endpointing_delay=1.5))])
    user = next(ev for ev in rec.of("conversation_item_added")
                if ev.item.type == "message" and ev.item.role == "user")
    assert near(rec.t(user), 4.0)


async def test_switching_to_manual_turn_detection_stops_automatic_replies(autojump_clock):
    session = create_session(_user_turn_actions())
    rec = await run_recorded(session, Agent(instructions="x"), script=[
        (0.2, lambda s: s.update_options(turn_detection="manual"))])
    messages = [ev for ev in rec.of("conversation_item_added") if ev.item.type == "message"]
    # no reply; the words are only recorded by the close, unanswered
    assert [ev.item.role for ev in messages] == ["user"] and rec.t(messages[0]) > 5.0
    assert session.turn_detection == "manual"


def test_update_options_checks_its_values() -> None:
    session = AgentSession()
    with pytest.raises(ValueError):
        session.update_options(endpointing_opts={"min_delay": -1.0})
    with pytest.raises(ValueError):
        session.update_options(turn_detection="telepathy")


# -- reset_away_timer ------------------------------------------------------------------------

async def test_reset_away_timer_restarts_the_countdown_and_brings_the_user_back(autojump_clock):
    states: list[tuple[str, float]] = []
    async with AgentSession(llm=FakeLLM([]), user_away_timeout=5.0) as session:
        session.on("user_state_changed",
                   lambda ev: states.append((ev.new_state, trio.current_time())))
        session.reset_away_timer()  # before start: nothing happens
        await session.start(Agent(instructions="x"))
        t0 = trio.current_time()
        await trio.sleep(4.0)
        session.reset_away_timer()   # the full 5 s again, from now
        await trio.sleep(6.0)
        session.reset_away_timer()   # away since 9 s: back to listening
        await trio.sleep(1.0)
    assert [(s, round(t - t0, 3)) for s, t in states] == [("away", 9.0), ("listening", 10.0)]


# -- wait_for_idle ---------------------------------------------------------------------------

async def test_wait_for_idle_returns_once_the_turn_and_its_reply_are_done(autojump_clock):
    from agents_trio.testing import FakeAudioInput
    a = _user_turn_actions()
    session = create_session(a)
    idle_at: list[float] = []
    states: list[tuple[str, float]] = []
    session.on("agent_state_changed",
               lambda ev: states.append((ev.new_state, trio.current_time())))
    async with session:
        with pytest.raises(RuntimeError, match="no running agent"):
            await session.wait_for_idle()
        await session.start(Agent(instructions="x"))
        t0 = trio.current_time()
        assert isinstance(session.input.audio, FakeAudioInput)
        session.input.audio.push(0.1)
        await trio.sleep(1.0)                 # the user is speaking
        activity = await session.wait_for_idle()
        idle_at.append(trio.current_time() - t0)
        assert activity is session.activity
        await session.aclose()
    # the reply (end of turn at 3.0 s, 1.0 s of audio from 3.2 s) ended at 4.2 s
    last_listening = [t - t0 for s, t in states if s == "listening"][-1]
    assert near(idle_at[0], last_listening) and idle_at[0] > 3.0
    from agents_trio import SessionClosedError
    with pytest.raises(SessionClosedError):
        await session.wait_for_idle()
