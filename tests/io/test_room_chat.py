"""Chat (``lk.chat``) through RoomIO, in virtual time: who may speak for the user, the order of
messages, what a burst becomes, and what is refused.

The room is a FakeRoom (no SDK audio: text only), so these run on Trio's MockClock.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from livekit import rtc

from agents_trio import Agent, AgentSession, open_bridge
from agents_trio.io.room import RoomIO, RoomOptions, open_room_io
from agents_trio.testing import FakeLLM, FakeRemoteParticipant, FakeRoom
from agents_trio.testing.actions import FakeLLMResponse
from room_witnesses import agent_state_reaches, room_events_handled, session_until

TEXT_ONLY = RoomOptions(audio_input=False, audio_output=False)
MAY_RECONNECT = rtc.DisconnectReason.SIGNAL_CLOSE


class Chatty(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Answer the chat.")


@asynccontextmanager
async def chat_room(session: AgentSession, options: RoomOptions = TEXT_ONLY
                    ) -> AsyncIterator[tuple[Any, FakeRoom, RoomIO]]:
    async with open_bridge() as bridge:
        room = FakeRoom()
        async with open_room_io(room, session, options=options) as rio, session:
            await session.start(Chatty())
            yield bridge, room, rio


def user_texts(session: AgentSession) -> list[str]:
    return [m.text_content or "" for m in session.history.messages() if m.role == "user"]


def user_lines(session: AgentSession) -> list[str]:
    """Every line the user's messages carried, in history order."""
    return [line for text in user_texts(session) for line in text.split("\n")]


def send_all(room: FakeRoom, identity: str, texts: list[Any]) -> None:
    """asyncio side: messages sent back to back (one SDK callback each, in one loop turn)."""
    for text in texts:
        room.send_chat(identity, text)


def requested(llm: FakeLLM) -> list[str]:
    """The text of the last item of every LLM request (what each request answered)."""
    return [c["chat_ctx"].items[-1].text_content for c in llm.calls]


# -- who speaks for the user (issue 15, item 17) -----------------------------------------------
async def test_chat_from_a_stranger_before_anyone_is_linked_is_ignored(
        autojump_clock: trio.testing.MockClock) -> None:
    session = AgentSession(llm=FakeLLM())
    async with chat_room(session) as (bridge, room, rio):
        bridge.call_soon(room.send_chat, "stranger", "pretend I am the user")
        await room_events_handled(bridge)
        assert rio.text_input_statistics().ignored == 1   # seen, and ignored
        bridge.call_soon(room.join, FakeRemoteParticipant("user"))
        assert (await rio.wait_for_participant()).identity == "user"
        bridge.call_soon(room.send_chat, "user", "hi")
        await session_until(session, lambda: "hi" in user_texts(session))
    assert user_texts(session) == ["hi"]


async def test_a_reconnecting_user_keeps_the_link_and_a_stranger_is_not_linked(
        autojump_clock: trio.testing.MockClock) -> None:
    session = AgentSession(llm=FakeLLM())
    async with chat_room(session) as (bridge, room, rio):
        user = FakeRemoteParticipant("user")
        bridge.call_soon(room.join, user)
        await rio.wait_for_participant()
        bridge.call_soon(room.leave, user, MAY_RECONNECT)   # a network blip
        await room_events_handled(bridge)
        assert rio.linked_participant is None
        stranger = FakeRemoteParticipant("stranger")
        bridge.call_soon(room.join, stranger)
        bridge.call_soon(room.send_chat, "stranger", "I am the user now")
        await room_events_handled(bridge)
        assert rio.text_input_statistics().ignored == 1   # seen, and ignored
        assert rio.linked_participant is None
        assert session.agent_state == "listening"   # the session waits for its user
        back = FakeRemoteParticipant("user")
        bridge.call_soon(room.join, back)
        await rio.wait_for_participant()
        assert rio.linked_participant is back
        bridge.call_soon(room.send_chat, "user", "I am back")
        await session_until(session, lambda: "I am back" in user_texts(session))
    assert user_texts(session) == ["I am back"]


async def test_a_user_gone_for_good_frees_the_link_when_the_session_stays_open(
        autojump_clock: trio.testing.MockClock) -> None:
    session = AgentSession(llm=FakeLLM())
    options = RoomOptions(audio_input=False, audio_output=False, close_on_disconnect=False)
    async with chat_room(session, options) as (bridge, room, rio):
        first = FakeRemoteParticipant("first")
        bridge.call_soon(room.join, first)
        await rio.wait_for_participant()
        bridge.call_soon(room.leave, first, rtc.DisconnectReason.CLIENT_INITIATED)
        await room_events_handled(bridge)
        assert rio.linked_participant is None
        bridge.call_soon(room.join, FakeRemoteParticipant("next"))
        await rio.wait_for_participant()
        assert rio.linked_participant.identity == "next"
        bridge.call_soon(room.send_chat, "next", "hello")
        await session_until(session, lambda: "hello" in user_texts(session))


async def test_the_identity_named_in_the_options_may_chat_before_it_is_linked(
        autojump_clock: trio.testing.MockClock) -> None:
    session = AgentSession(llm=FakeLLM())
    options = RoomOptions(audio_input=False, audio_output=False, participant_identity="alice")
    async with chat_room(session, options) as (bridge, room, rio):
        bridge.call_soon(room.send_chat, "mallory", "not me")
        bridge.call_soon(room.send_chat, "alice", "from alice")
        await session_until(session, lambda: "from alice" in user_texts(session))
    assert user_texts(session) == ["from alice"]


# -- order and bursts (items 18, 19) -------------------------------------------------------------
async def test_chat_messages_reach_the_history_in_the_order_they_were_sent(
        autojump_clock: trio.testing.MockClock) -> None:
    session = AgentSession(llm=FakeLLM())
    sent = [f"m{i}" for i in range(5)]
    async with chat_room(session) as (bridge, room, rio):
        bridge.call_soon(room.join, FakeRemoteParticipant("user"))
        await rio.wait_for_participant()
        bridge.call_soon(send_all, room, "user", sent)
        await session_until(session, lambda: set(sent) <= set(user_lines(session)))
    assert user_lines(session) == sent


async def test_chat_sent_while_the_agent_thinks_is_coalesced_into_one_input(
        autojump_clock: trio.testing.MockClock) -> None:
    llm = FakeLLM([FakeLLMResponse(input="a", content="About a.", ttft=1.0, duration=2.0),
                   FakeLLMResponse(input="b\nc", content="About b and c.", ttft=1.0,
                                   duration=2.0)])
    session = AgentSession(llm=llm)
    async with chat_room(session) as (bridge, room, rio):
        bridge.call_soon(room.join, FakeRemoteParticipant("user"))
        await rio.wait_for_participant()
        bridge.call_soon(room.send_chat, "user", "a")
        await agent_state_reaches(session, "thinking")
        await trio.sleep(0.5)   # virtual time: the first answer is still 0.5 s away
        bridge.call_soon(send_all, room, "user", ["b", "c"])   # the agent is still thinking
        await session_until(session, lambda: any(
            m.role == "assistant" and m.text_content == "About b and c."
            for m in session.history.messages()))
    assert requested(llm) == ["a", "b\nc"]
    assert user_texts(session) == ["a", "b\nc"]
    stats = rio.text_input_statistics()
    assert (stats.received, stats.delivered_inputs, stats.refused) == (3, 2, 0)


async def test_a_chat_flood_gives_a_bounded_number_of_requests_and_loses_no_accepted_text(
        autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture) -> None:
    llm = FakeLLM()
    session = AgentSession(llm=llm)
    flood = [f"m{i}" for i in range(5000)]
    async with chat_room(session) as (bridge, room, rio):
        bridge.call_soon(room.join, FakeRemoteParticipant("user"))
        await rio.wait_for_participant()
        with caplog.at_level(logging.WARNING, logger="agents_trio.room"):
            bridge.call_soon(send_all, room, "user", flood)
            await trio.sleep(1)   # virtual time: the agent works through the accepted part
            bridge.call_soon(room.send_chat, "user", "after the flood")   # the witness
            await session_until(session, lambda: "after the flood" in user_texts(session))
        stats = rio.text_input_statistics()
    lines = user_lines(session)
    accepted = lines[:-1]
    # every accepted message once, in order; the refused ones are the tail of the burst
    assert accepted == flood[:len(accepted)] and lines[-1] == "after the flood"
    assert stats.received == 5001 and stats.refused == 5000 - len(accepted)
    assert stats.refused > 0 and len(accepted) >= RoomOptions().text_input_max_messages
    assert len(llm.calls) <= 3
    assert any("refused" in r.getMessage() for r in caplog.records)


async def test_a_message_over_the_size_bound_is_refused_and_logged(
        autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture) -> None:
    session = AgentSession(llm=FakeLLM())
    options = RoomOptions(audio_input=False, audio_output=False, text_input_max_chars=100)
    async with chat_room(session, options) as (bridge, room, rio):
        bridge.call_soon(room.join, FakeRemoteParticipant("user"))
        await rio.wait_for_participant()
        with caplog.at_level(logging.WARNING, logger="agents_trio.room"):
            bridge.call_soon(send_all, room, "user", ["x" * 101, "fits"])
            await session_until(session, lambda: "fits" in user_texts(session))
    assert user_texts(session) == ["fits"]
    assert rio.text_input_statistics().refused == 1
    assert any("refused" in r.getMessage() and "101" in r.getMessage()
               for r in caplog.records)


# -- empty input (item 22) -----------------------------------------------------------------------
async def test_empty_chat_messages_are_ignored(autojump_clock: trio.testing.MockClock) -> None:
    llm = FakeLLM()
    session = AgentSession(llm=llm)
    async with chat_room(session) as (bridge, room, rio):
        bridge.call_soon(room.join, FakeRemoteParticipant("user"))
        await rio.wait_for_participant()
        bridge.call_soon(send_all, room, "user", ["", None, "  \n "])
        await room_events_handled(bridge)
        assert rio.text_input_statistics().ignored == 3   # read, and ignored
        assert llm.calls == []
        bridge.call_soon(room.send_chat, "user", "hi")
        await session_until(session, lambda: "hi" in user_texts(session))
    assert requested(llm) == ["hi"] and user_texts(session) == ["hi"]


@pytest.mark.parametrize("blank", ["", " \n\t"])
async def test_generate_reply_refuses_a_blank_user_input(
        blank: str, autojump_clock: trio.testing.MockClock) -> None:
    llm = FakeLLM()
    async with AgentSession(llm=llm) as session:
        await session.start(Chatty())
        with pytest.raises(ValueError, match="user_input"):
            session.generate_reply(user_input=blank)
        await trio.testing.wait_all_tasks_blocked()
    assert llm.calls == []
