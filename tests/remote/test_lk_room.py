"""The room transport (``lk.agent.session`` byte streams): LiveKit's own RemoteSession (its
RoomSessionTransport) drives our host over a room, and our client drives LiveKit's SessionHost
over a room. The rooms are fakes with the SDK's byte-stream surface, linked to each other and
living on the bridge's asyncio loop."""

from __future__ import annotations

from typing import Any

import pytest
import trio

pytest.importorskip("livekit.agents")

from livekit.protocol.agent_pb import agent_session as pb  # noqa: E402

from agents_trio import open_bridge  # noqa: E402
from agents_trio.chat import FunctionCall  # noqa: E402
from agents_trio.remote import lk  # noqa: E402
from agents_trio.remote.lk.room import (host_session_on_room,  # noqa: E402
                                        open_room_remote_session, serve_room)
from lk_agents import lk_weather_session  # noqa: E402
from lk_helpers import LinkedRoom, link_rooms  # noqa: E402
from remote_helpers import Weather, text_session  # noqa: E402


async def test_livekit_remote_session_drives_our_host_over_a_room() -> None:
    agent_room, user_room, stranger_room = (LinkedRoom("agent"), LinkedRoom("user"),
                                            LinkedRoom("stranger"))
    link_rooms(agent_room, user_room, stranger_room)
    session = text_session(fast=True)
    with trio.fail_after(30):
        async with open_bridge() as bridge, session, \
                lk.open_session_host(session, listeners=[]) as host, \
                trio.open_nursery() as nursery:
            await session.start(Weather())
            link = await nursery.start(serve_room, host, agent_room, bridge)

            async def drive() -> dict[str, Any]:
                from livekit.agents.voice.remote_session import RemoteSession
                remote = RemoteSession.from_room(user_room, "agent")  # type: ignore[arg-type]
                added: list[Any] = []
                remote.on("conversation_item_added", added.append)
                await remote.start()
                try:
                    await remote.wait_for_ready(timeout=5.0)
                    ran = await remote.run("weather in Paris?", timeout=10.0)
                    history = await remote.get_chat_history()
                    info = await remote.get_agent_info()
                    state = await remote.get_session_state()
                    return {"ran": ran, "history": history, "info": info, "state": state,
                            "added": added}
                finally:
                    await remote.aclose()

            out = await bridge.run(drive)
            assert link.messages_in >= 5 and link.messages_out >= 5
            # answers go to the participant that asked, never to the whole room
            assert {tuple(d or ()) for t, d in agent_room.sent} == {("user",)}
            nursery.cancel_scope.cancel()

    kinds = [i.WhichOneof("item") for i in out["ran"].items]
    assert kinds == ["message", "function_call", "function_call_output", "message"]
    assert out["ran"].items[-1].message.content[0].text == "It is sunny in Paris."
    assert len(out["history"].items) >= 4
    assert out["info"].instructions == "You answer weather questions."
    assert out["state"].agent_id == out["info"].id
    assert any(ev.conversation_item_added.item.WhichOneof("item") == "message"
               for ev in out["added"])


async def test_an_oversized_room_message_closes_only_that_peer() -> None:
    agent_room, user_room = LinkedRoom("agent"), LinkedRoom("user")
    link_rooms(agent_room, user_room)
    session = text_session(fast=True)
    with trio.fail_after(30):
        async with open_bridge() as bridge, session, \
                lk.open_session_host(session, listeners=[], max_frame_size=1024) as host, \
                trio.open_nursery() as nursery:
            await session.start(Weather())
            link = await nursery.start(serve_room, host, agent_room, bridge)
            async with open_room_remote_session(user_room, "agent", bridge) as remote:
                huge = pb.AgentSessionMessage(request=pb.SessionRequest(
                    request_id="big", run_input=pb.SessionRequest.RunInput(text="x" * 5000)))
                await bridge.run(user_room.send_bytes, huge.SerializeToString(),
                                 topic="lk.agent.session", destination_identities=["agent"])
                with trio.fail_after(5):
                    while link.messages_refused < 1:
                        await trio.sleep(0.01)
            # a new conversation from the same participant is served again
            async with open_room_remote_session(user_room, "agent", bridge) as remote:
                await remote.wait_for_ready()
                ran = await remote.run("hello")
                assert ran.items[-1].message.content[0].text == "Hi there!"
            nursery.cancel_scope.cancel()


async def test_our_remote_session_drives_livekit_session_host_over_a_room() -> None:
    agent_room, user_room = LinkedRoom("agent"), LinkedRoom("user")
    link_rooms(agent_room, user_room)
    with trio.fail_after(30):
        async with open_bridge() as bridge:
            async def start_livekit() -> Any:
                from livekit.agents.voice.remote_session import RoomSessionTransport, SessionHost
                lk_session, agent = lk_weather_session()
                await lk_session.start(agent)
                host = SessionHost(RoomSessionTransport(agent_room))  # type: ignore[arg-type]
                host.register_session(lk_session)
                await host.start()
                return lk_session, host

            lk_session, lk_host = await bridge.run(start_livekit)
            try:
                async with open_room_remote_session(user_room, "agent", bridge) as remote:
                    await remote.wait_for_ready()
                    ran = await remote.run("weather in Paris?", timeout=10)
                    info = await remote.get_agent_info()
            finally:
                await bridge.run(lk_host.aclose)
                await bridge.run(lk_session.aclose)

    items = lk.decode_chat_items(ran.items)
    assert any(isinstance(i, FunctionCall) and i.name == "get_weather" for i in items)
    assert info.instructions == "You are LiveKit's weather agent."


async def test_a_participant_leaving_ends_its_connection() -> None:
    agent_room, user_room = LinkedRoom("agent"), LinkedRoom("user")
    link_rooms(agent_room, user_room)
    session = text_session(fast=True)
    with trio.fail_after(30):
        async with open_bridge() as bridge, session, \
                lk.open_session_host(session, listeners=[]) as host, \
                trio.open_nursery() as nursery:
            await session.start(Weather())
            await nursery.start(serve_room, host, agent_room, bridge)
            async with open_room_remote_session(user_room, "agent", bridge) as remote:
                await remote.wait_for_ready()
                assert host.statistics().connections == 1
                await bridge.run_sync(user_room.leave)
                while host.statistics().connections:
                    await trio.sleep(0.01)
            assert agent_room.listeners["participant_disconnected"]
            nursery.cancel_scope.cancel()
        assert agent_room.listeners["participant_disconnected"] == []  # unregistered


async def test_a_session_hosts_itself_on_its_room_until_it_closes() -> None:
    """As LiveKit's AgentSession does in a room: LiveKit's RemoteSession.from_room reaches it;
    when the session closes, the hosting ends."""
    agent_room, user_room = LinkedRoom("agent"), LinkedRoom("user")
    link_rooms(agent_room, user_room)
    session = text_session(fast=True)
    with trio.fail_after(30):
        async with open_bridge() as bridge, trio.open_nursery() as nursery:
            async with session:
                host = await nursery.start(host_session_on_room, session, agent_room, bridge)
                await session.start(Weather())

                async def drive() -> Any:
                    from livekit.agents.voice.remote_session import RemoteSession
                    remote = RemoteSession.from_room(user_room, "agent")  # type: ignore[arg-type]
                    await remote.start()
                    try:
                        await remote.wait_for_ready(timeout=5.0)
                        return await remote.run("hello", timeout=10.0)
                    finally:
                        await remote.aclose()

                ran = await bridge.run(drive)
                assert ran.items[-1].message.content[0].text == "Hi there!"
            await host.wait_stopped()  # the session closed: so did its hosting
            with trio.fail_after(5):
                while "lk.agent.session" in agent_room.handlers:
                    await trio.sleep(0.01)


async def test_a_job_session_is_reachable_on_its_room_as_in_livekit() -> None:
    """``ctx.run_session`` serves the session on the room's ``lk.agent.session`` byte streams
    while it runs, as LiveKit's AgentSession does in a room: LiveKit's own
    ``RemoteSession.from_room`` (as its simulation tooling uses it) runs a turn on it; when the
    session closes, the room's handler is gone."""
    from livekit import rtc

    from agents_trio.job import JobContext
    from agents_trio.testing import FakeRemoteParticipant
    from agents_trio.testing.fake_room import FakeRoom

    class HostingRoom(FakeRoom):
        """A fake room with the byte-stream surface of ``rtc.Room``, linked to LinkedRooms."""

        def __init__(self) -> None:
            super().__init__(agent_identity="agent")
            self.identity = "agent"
            self.handlers: dict[str, Any] = {}
            self.peers: list[LinkedRoom] = []
            self.sent: list[tuple[str, list[str] | None]] = []
            self.local_participant.send_bytes = self._send_bytes  # type: ignore[attr-defined]

        def register_byte_stream_handler(self, topic: str, handler: Any) -> None:
            self.handlers[topic] = handler

        def unregister_byte_stream_handler(self, topic: str) -> None:
            self.handlers.pop(topic, None)

        async def _send_bytes(self, data: bytes, **kw: Any) -> None:
            await LinkedRoom.send_bytes(self, data, **kw)  # type: ignore[arg-type]

    room, user_room = HostingRoom(), LinkedRoom("user")
    room.peers, user_room.peers = [user_room], [room]  # type: ignore[list-item]
    user = FakeRemoteParticipant("user")
    with trio.fail_after(30):
        async with open_bridge() as bridge, trio.open_nursery() as nursery:
            ctx = JobContext(bridge, room)  # type: ignore[arg-type]
            bridge.call_soon(room.join, user)
            done = trio.Event()
            result: dict[str, str | None] = {}

            async def run() -> None:
                result["reason"] = await ctx.run_session(text_session(fast=True), Weather())
                done.set()

            nursery.start_soon(run)

            async def drive() -> Any:
                from livekit.agents.voice.remote_session import RemoteSession
                remote = RemoteSession.from_room(user_room, "agent")  # type: ignore[arg-type]
                await remote.start()
                try:
                    await remote.wait_for_ready(timeout=10.0)
                    return await remote.run("hello", timeout=10.0)
                finally:
                    await remote.aclose()

            ran = await bridge.run(drive)
            assert ran.items[-1].message.content[0].text == "Hi there!"
            assert "lk.agent.session" in room.handlers
            bridge.call_soon(room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)
            await done.wait()
    assert result["reason"] == "participant_disconnected"
    assert "lk.agent.session" not in room.handlers
