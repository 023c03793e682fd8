"""A realtime reply cancelled after its request went out never comes out later (race-free).

LiveKit's OpenAI plugin creates a response whenever the server's ``response.created`` comes
in; a response whose ``generate_reply()`` future is already done (cancelled, timed out) is
emitted as *not* user-initiated, i.e. as a new server turn. ``FakePluginRealtimeSession``
does the same (``created`` records each response and whether it came late), and ignores a
``response.cancel`` sent before the response existed: the worst case for the runtime.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from lk_fakes import FakePluginRealtimeModel  # noqa: E402

from agents_trio import Agent, AgentSession, open_bridge  # noqa: E402
from agents_trio.plugins import RealtimeModelAdapter  # noqa: E402
from agents_trio.testing import FakeAudioOutput  # noqa: E402

RATE = 24000


class Front(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")


class Sales(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You sell.")


def _session(model: FakePluginRealtimeModel) -> tuple[AgentSession, list[str]]:
    session = AgentSession(llm=RealtimeModelAdapter(model))
    session.output.audio = FakeAudioOutput(sample_rate=RATE)
    states: list[str] = []
    session.on("agent_state_changed", lambda ev: states.append(ev.new_state))
    return session, states


def _assistant_texts(session: AgentSession) -> list[str]:
    return [m.text_content or "" for m in session.history.messages() if m.role == "assistant"]


@pytest.mark.parametrize("via", ["generate_reply", "say"])
async def test_a_reply_interrupted_before_the_server_created_it_never_plays(
        autojump_clock: trio.testing.MockClock, via: str) -> None:
    model = FakePluginRealtimeModel(supports_say=True)
    async with open_bridge() as bridge:
        session, states = _session(model)
        async with session:
            await session.start(Front())
            [lk] = model.sessions
            if via == "say":
                handle = session.say("a stale reply")
            else:
                handle = session.generate_reply(instructions="greet")
            await trio.sleep(0.1)  # the request went out; the server has not created it yet
            assert [name for name, _ in lk.calls][-1] == via
            handle.interrupt()
            with trio.fail_after(5):
                await handle.wait_for_playout()
            await trio.sleep(3.0)  # the response is created at 0.2 s and would play for ~0.3 s
            text = "a stale reply" if via == "say" else "hello from realtime"
            assert [t for t, _ in lk.created] == [text]  # the server did create it
            assert "speaking" not in states
            assert text not in _assistant_texts(session)
            assert session.current_speech is None
            # the server was told to stop it, and nothing else was
            assert [name for name, _ in lk.calls].count("interrupt") == 1
        assert bridge.statistics().asyncio_tasks == 0


async def test_a_reply_pending_at_a_handoff_never_plays_on_either_agent(
        autojump_clock: trio.testing.MockClock) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        session, states = _session(model)
        async with session:
            await session.start(Front())
            session.generate_reply(instructions="greet")
            await trio.sleep(0.1)
            session.update_agent(Sales())
            with trio.fail_after(10):
                while len(model.sessions) < 2:
                    await trio.sleep(0.1)
            await trio.sleep(3.0)
            assert "speaking" not in states
            assert "hello from realtime" not in _assistant_texts(session)
            assert model.sessions[0].closed
            assert all(name != "generate_reply" for name, _ in model.sessions[1].calls)
        assert bridge.statistics().asyncio_tasks == 0


async def test_a_reply_pending_at_close_never_plays(
        autojump_clock: trio.testing.MockClock) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        session, states = _session(model)
        async with session:
            await session.start(Front())
            session.generate_reply(instructions="greet")
            await trio.sleep(0.1)
        await trio.sleep(3.0)
        [lk] = model.sessions
        assert lk.closed
        assert "speaking" not in states
        assert "hello from realtime" not in _assistant_texts(session)
        assert bridge.statistics().asyncio_tasks == 0


async def test_the_adapter_stops_and_drops_the_response_of_a_cancelled_request(
        autojump_clock: trio.testing.MockClock) -> None:
    from agents_trio.realtime import GenerationCreatedEvent, InputSpeechStartedEvent

    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        async with RealtimeModelAdapter(model).session() as rt:
            [lk] = model.sessions
            with trio.move_on_after(0.1):
                await rt.generate_reply(instructions="greet")
                pytest.fail("the response is created at 0.2 s")
            await trio.sleep(0.5)
            # the plugin's future stayed pending: the response was still the request's
            assert lk.created == [("hello from realtime", False)]
            assert [name for name, _ in lk.calls] == ["generate_reply", "interrupt"]
            bridge.call_soon(lk.server_turn)
            events = rt.events()
            assert isinstance(await events.__anext__(), InputSpeechStartedEvent)
            await events.__anext__()  # speech stopped
            await events.__anext__()  # the transcript
            server_gen = await events.__anext__()  # not the dropped response
            assert isinstance(server_gen, GenerationCreatedEvent)
            assert not server_gen.user_initiated
            assert [c.name async for c in server_gen.function_stream] == ["lookup"]
        assert bridge.statistics().asyncio_tasks == 0
