"""Room I/O at its transitions: the room or the user going away while the session starts,
speaks or closes, in virtual time (a FakeRoom; the agent's voice, where there is one, goes to
a FakeAudioOutput on Trio's clock)."""

from __future__ import annotations

import trio
import trio.testing
from livekit import rtc

from agents_trio import Agent, AgentSession, open_bridge
from agents_trio.events import UserInputTranscribedEvent
from agents_trio.io.room import RoomOptions, open_room_io
from agents_trio.llm import Toolset
from agents_trio.session import SessionState
from agents_trio.testing import (FakeAudioOutput, FakeLLM, FakeRemoteParticipant, FakeRoom,
                                 FakeTTS)
from agents_trio.testing.actions import FakeLLMResponse, FakeTTSResponse
from room_witnesses import agent_state_reaches, room_events_handled, session_until

TEXT_ONLY = RoomOptions(audio_input=False, audio_output=False)


class SlowToolset(Toolset):
    """A toolset whose set-up waits until the test lets it go (a slow MCP server)."""

    def __init__(self, *, released: bool = False) -> None:
        super().__init__(id="slow")
        self.setup_began = trio.Event()
        self.release = trio.Event()
        if released:
            self.release.set()

    async def setup(self) -> Toolset:
        self.setup_began.set()
        await self.release.wait()
        return self


class SlowToStart(Agent):
    def __init__(self, toolset: SlowToolset) -> None:
        super().__init__(instructions="Be brief.", tools=[toolset])
        self.entered = 0

    async def on_enter(self) -> None:
        self.entered += 1


# -- the room gone while the session starts ------------------------------------------------------
async def test_a_room_dropping_while_the_session_starts_cancels_the_start(
        autojump_clock: trio.testing.MockClock) -> None:
    """The room lost during a slow start closes the session there (job_shutdown): the agent
    never enters. It used to wait for the session to run, so the start went on as long as the
    set-up took, then the agent entered a room that was gone."""
    toolset = SlowToolset()
    agent = SlowToStart(toolset)
    session = AgentSession(llm=FakeLLM())
    async with open_bridge() as bridge:
        room = FakeRoom()
        with trio.fail_after(30):
            async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.start, agent)
                    await toolset.setup_began.wait()
                    bridge.call_soon(room.drop)
                    with trio.move_on_after(10):
                        assert await rio.wait_session_closed() == "job_shutdown"
                    assert session.state is SessionState.CLOSED, \
                        "the session still starts 10 s after its room dropped"
                    toolset.release.set()
    assert agent.entered == 0


async def test_a_room_dropped_before_the_start_cancels_the_start_as_it_begins(
        autojump_clock: trio.testing.MockClock) -> None:
    """The room gone before ``start()``: the close waits for the start (``shutdown()`` is
    ignored before it, as in LiveKit) and cancels it as soon as it begins."""
    toolset = SlowToolset()
    agent = SlowToStart(toolset)
    session = AgentSession(llm=FakeLLM())
    async with open_bridge() as bridge:
        room = FakeRoom()
        with trio.fail_after(30):
            async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
                bridge.call_soon(room.drop)
                await room_events_handled(bridge)
                assert session.state is SessionState.ENTERED   # not closed before its start
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.start, agent)
                    with trio.move_on_after(10):
                        assert await rio.wait_session_closed() == "job_shutdown"
                    assert session.state is SessionState.CLOSED, \
                        "the session still starts 10 s after it began in a room gone"
                    toolset.release.set()
    assert agent.entered == 0


async def test_a_room_dropped_after_the_session_ran_closes_it_once(
        autojump_clock: trio.testing.MockClock) -> None:
    session = AgentSession(llm=FakeLLM())
    closes: list[object] = []
    session.on("close", lambda ev: closes.append(ev.reason))
    async with open_bridge() as bridge:
        room = FakeRoom()
        with trio.fail_after(30):
            async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
                await session.start(Agent(instructions="Be brief."))
                await session_until(session, lambda: session.agent_state == "listening")
                bridge.call_soon(room.drop)
                assert await rio.wait_session_closed() == "job_shutdown"
    assert closes == ["job_shutdown"]


# -- chat while the session starts -------------------------------------------------------------
async def test_chat_sent_while_the_session_starts_is_answered_once_it_runs(
        autojump_clock: trio.testing.MockClock) -> None:
    """The user's chat during a slow start waits for the agent and is answered once (as in
    LiveKit, where the reply is queued on the starting agent). It used to be handed to the
    session before it ran: ``generate_reply`` refused it, and the message was lost."""
    toolset = SlowToolset()
    agent = SlowToStart(toolset)
    llm = FakeLLM([FakeLLMResponse(input="hello", content="Hi there!", ttft=0.1, duration=0.2)])
    session = AgentSession(llm=llm)
    async with open_bridge() as bridge:
        room = FakeRoom()
        with trio.fail_after(30):
            async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
                bridge.call_soon(room.join, FakeRemoteParticipant("user"))
                await rio.wait_for_participant()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.start, agent)
                    await toolset.setup_began.wait()
                    bridge.call_soon(room.send_chat, "user", "hello")
                    await room_events_handled(bridge)
                    await trio.sleep(1.0)   # the start is still held up in the set-up
                    toolset.release.set()
                await session_until(session, lambda: "Hi there!" in texts_of(session,
                                                                             "assistant"))
                await trio.sleep(2.0)   # nothing more comes
    assert texts_of(session, "user") == ["hello"]
    assert texts_of(session, "assistant") == ["Hi there!"]
    assert rio.text_input_statistics().delivered_inputs == 1


def texts_of(session: AgentSession, role: str) -> list[str]:
    return [m.text_content or "" for m in session.history.messages() if m.role == role]


# -- the user leaving ------------------------------------------------------------------------
async def test_the_user_leaving_during_the_agents_speech_closes_once_as_participant_disconnected(
        autojump_clock: trio.testing.MockClock) -> None:
    answer = "One two three four five six seven eight nine ten."
    llm = FakeLLM([FakeLLMResponse(input="hello", content=answer, ttft=0.1, duration=0.2)])
    tts = FakeTTS([FakeTTSResponse(input=answer, audio_duration=4.0, ttfb=0.1, duration=0.2)])
    session = AgentSession(llm=llm, tts=tts)
    closes: list[object] = []
    session.on("close", lambda ev: closes.append(ev.reason))
    async with open_bridge() as bridge:
        room = FakeRoom()
        user = FakeRemoteParticipant("user")
        with trio.fail_after(30):
            async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
                session.output.audio = FakeAudioOutput()
                await session.start(SlowToStart(SlowToolset(released=True)))
                bridge.call_soon(room.join, user)
                await rio.wait_for_participant()
                bridge.call_soon(room.send_chat, "user", "hello")
                await agent_state_reaches(session, "speaking")
                await trio.sleep(1.0)
                bridge.call_soon(room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)
                assert await rio.wait_session_closed() == "participant_disconnected"
    assert closes == ["participant_disconnected"]
    [heard] = texts_of(session, "assistant")
    assert 0 < len(heard) < len(answer)
    finals = [w for w in room.transcripts("agent") if w.final]
    assert [w.text for w in finals] == [heard]   # the final text of the cut speech, once


async def test_the_user_leaving_while_the_session_starts_cancels_the_start(
        autojump_clock: trio.testing.MockClock) -> None:
    toolset = SlowToolset()
    agent = SlowToStart(toolset)
    session = AgentSession(llm=FakeLLM())
    async with open_bridge() as bridge:
        room = FakeRoom()
        user = FakeRemoteParticipant("user")
        with trio.fail_after(30):
            async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
                bridge.call_soon(room.join, user)
                await rio.wait_for_participant()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.start, agent)
                    await toolset.setup_began.wait()
                    bridge.call_soon(room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)
                    with trio.move_on_after(10):
                        assert await rio.wait_session_closed() == "participant_disconnected"
                    assert session.state is SessionState.CLOSED
                    toolset.release.set()
    assert agent.entered == 0


# -- the user's transcription after the link changed -------------------------------------------
async def test_a_newly_linked_users_transcription_does_not_name_the_previous_users_track(
) -> None:
    """User A (microphone subscribed) leaves, user B (no microphone yet) is linked: B's
    transcription must not carry A's track id (it kept the id of the last track served, so
    B's words were attributed to A's microphone). Real SDK track: on the wall clock."""
    session = AgentSession(llm=FakeLLM())
    options = RoomOptions(audio_output=False, close_on_disconnect=False)
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            room = FakeRoom()
            source = await bridge.run_sync(rtc.AudioSource, 24000, 1)
            track = await bridge.run_sync(rtc.LocalAudioTrack.create_audio_track, "mic", source)
            first, second = FakeRemoteParticipant("a"), FakeRemoteParticipant("b")
            microphone = first.add_microphone(track)
            async with open_room_io(room, session, options=options) as rio, session:
                await session.start(Agent(instructions="Be brief."))
                bridge.call_soon(room.join, first)
                bridge.call_soon(room.subscribe, first, microphone)
                await rio.wait_for_participant()
                session.conversation.emit("user_input_transcribed", UserInputTranscribedEvent(
                    transcript="from a", is_final=True))
                await room.wait_for(lambda: room.transcripts("a"))
                bridge.call_soon(room.leave, first, rtc.DisconnectReason.CLIENT_INITIATED)
                bridge.call_soon(room.join, second)
                await room_events_handled(bridge)
                assert (await rio.wait_for_participant()).identity == "b"
                session.conversation.emit("user_input_transcribed", UserInputTranscribedEvent(
                    transcript="from b", is_final=True))
                await room.wait_for(lambda: room.transcripts("b"))
            await bridge.run(source.aclose)
    [from_a] = room.transcripts("a")
    [from_b] = room.transcripts("b")
    assert from_a.attributes.get("lk.transcribed_track_id") == microphone.sid
    assert "lk.transcribed_track_id" not in from_b.attributes, from_b.attributes
