"""The room's connection and the session's end, in virtual time: a room that is gone before or
while it is linked, and what the user heard when the session closes mid-speech.

The agent's voice goes to a FakeAudioOutput (Trio's clock) instead of the SDK's AudioSource.
"""

from __future__ import annotations

import pytest
import trio

from agents_trio import Agent, AgentSession, open_bridge
from agents_trio.io.room import RoomDisconnectedError, RoomOptions, open_room_io
from agents_trio.testing import (FakeAudioOutput, FakeLLM, FakeRemoteParticipant, FakeRoom,
                                 FakeTTS)
from agents_trio.testing.actions import FakeLLMResponse, FakeTTSResponse
from room_witnesses import agent_state_reaches, room_events_handled

TEXT_ONLY = RoomOptions(audio_input=False, audio_output=False)


class Quiet(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")


# -- a room that is gone (issue 15, item 16) --------------------------------------------------
async def test_linking_a_disconnected_room_fails_fast(
        autojump_clock: trio.testing.MockClock) -> None:
    async with open_bridge():
        room = FakeRoom()
        room.connected = False
        session = AgentSession(llm=FakeLLM())
        with trio.fail_after(5), pytest.raises(RoomDisconnectedError, match="not connected"):
            async with open_room_io(room, session, options=TEXT_ONLY), session:
                await session.start(Quiet())
                await trio.sleep_forever()
        assert room.text_handlers == {}   # nothing stays registered


async def test_a_room_dropping_before_the_session_starts_closes_it_with_job_shutdown(
        autojump_clock: trio.testing.MockClock) -> None:
    async with open_bridge() as bridge:
        room = FakeRoom()
        session = AgentSession(llm=FakeLLM())
        with trio.fail_after(5):
            async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
                bridge.call_soon(room.drop)
                await room_events_handled(bridge)   # the drop is seen before anything runs
                await session.start(Quiet())
                assert await rio.wait_session_closed() == "job_shutdown"


async def test_waiting_for_a_participant_fails_when_the_room_drops(
        autojump_clock: trio.testing.MockClock) -> None:
    async with open_bridge() as bridge:
        room = FakeRoom()
        session = AgentSession(llm=FakeLLM())
        async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
            await session.start(Quiet())

            async def drop_later() -> None:
                await trio.sleep(1)
                bridge.call_soon(room.drop)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(drop_later)
                with trio.fail_after(5), pytest.raises(RoomDisconnectedError):
                    await rio.wait_for_participant()
            assert await rio.wait_session_closed() == "job_shutdown"
            with pytest.raises(RoomDisconnectedError):   # and at once afterwards
                await rio.wait_for_participant()


# -- what the user heard (item 22) ------------------------------------------------------------
async def test_closing_mid_speech_sends_the_final_transcription_of_what_was_heard(
        autojump_clock: trio.testing.MockClock) -> None:
    answer = "One two three four five six seven eight nine ten."
    llm = FakeLLM([FakeLLMResponse(input="hello", content=answer, ttft=0.1, duration=0.2)])
    tts = FakeTTS([FakeTTSResponse(input=answer, audio_duration=4.0, ttfb=0.1, duration=0.2)])
    session = AgentSession(llm=llm, tts=tts)
    async with open_bridge() as bridge:
        room = FakeRoom()
        async with open_room_io(room, session, options=TEXT_ONLY) as rio, session:
            session.output.audio = FakeAudioOutput()
            await session.start(Quiet())
            bridge.call_soon(room.join, FakeRemoteParticipant("user"))
            await rio.wait_for_participant()
            bridge.call_soon(room.send_chat, "user", "hello")
            await agent_state_reaches(session, "speaking")
            await trio.sleep(2.0)   # virtual time: half of the answer played
            session.shutdown(drain=False)
            assert await rio.wait_session_closed() == "user_initiated"
    [heard] = [m for m in session.history.messages() if m.role == "assistant"]
    assert 0 < len(heard.text_content) < len(answer)
    finals = [w for w in room.transcripts("agent") if w.final]
    assert [w.text for w in finals] == [heard.text_content]
