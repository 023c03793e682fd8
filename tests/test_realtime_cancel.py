"""A realtime reply cancelled after its request went out never comes out later (race-free).

The fake server creates the response of a ``generate_reply`` cancelled during its ``ttft``
anyway; its session drops it, or hands it out of ``events()`` as user-initiated (what a
LiveKit plugin does for a request whose future is still pending). Either way the interrupted
reply must not play, the runtime calls no ``interrupt()`` for it (the protocol's
``generate_reply`` docstring), and the session stays usable. Through the LiveKit adapter:
``tests/plugins/test_plugin_realtime_cancel.py``.
"""

from __future__ import annotations

import pytest
import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeAudioInput, FakeAudioOutput, FakeRealtimeModel


class Front(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")


class Sales(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You sell.")


def _session(model: FakeRealtimeModel) -> tuple[AgentSession, list[str]]:
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    states: list[str] = []
    session.on("agent_state_changed", lambda ev: states.append(ev.new_state))
    return session, states


def _assistant_texts(session: AgentSession) -> list[str]:
    return [m.text_content or "" for m in session.history.messages() if m.role == "assistant"]


@pytest.mark.parametrize("abandoned", ["drop", "emit"])
async def test_a_reply_interrupted_while_the_server_thinks_never_plays(autojump_clock,
                                                                       abandoned):
    model = FakeRealtimeModel(abandoned_responses=abandoned)
    model.add_response("greet", "A stale greeting.", audio_duration=1.0, ttft=0.5)
    model.add_response("again", "A fresh reply.", audio_duration=1.0, ttft=0.5)
    session, states = _session(model)
    async with session:
        await session.start(Front())
        rt = model.sessions[0]
        handle = session.generate_reply(instructions="greet")
        await trio.sleep(0.2)
        assert rt.call_names()[-1] == "generate_reply"
        handle.interrupt()
        with trio.fail_after(5):
            await handle.wait_for_playout()
        await trio.sleep(3.0)  # created at 0.5 s, it would have played for 1 s
        assert "speaking" not in states
        assert "A stale greeting." not in _assistant_texts(session)
        assert rt.dropped == (["greet"] if abandoned == "drop" else [])
        assert "interrupt" not in rt.call_names()
        with trio.fail_after(10):
            await session.generate_reply(instructions="again").wait_for_playout()
        assert _assistant_texts(session) == ["A fresh reply."]
    assert model.violations == []


@pytest.mark.parametrize("abandoned", ["drop", "emit"])
async def test_a_reply_pending_at_a_handoff_or_close_never_plays(autojump_clock, abandoned):
    model = FakeRealtimeModel(abandoned_responses=abandoned)
    model.add_response("greet", "A stale greeting.", audio_duration=1.0, ttft=0.5)
    session, states = _session(model)
    async with session:
        await session.start(Front())
        session.generate_reply(instructions="greet")
        await trio.sleep(0.2)
        session.update_agent(Sales())
        with trio.fail_after(10):
            while len(model.sessions) < 2:
                await trio.sleep(0.1)
        session.generate_reply(instructions="greet")
        await trio.sleep(0.2)
    await trio.sleep(3.0)
    assert "speaking" not in states
    assert "A stale greeting." not in _assistant_texts(session)
    assert all(s.closed for s in model.sessions)
    assert model.violations == []
