"""WarmTransferTask against a fake LiveKit server API (real Twirp over HTTP, see fake_twirp)
and fake rooms: the caller's (the job's) and the consultation room.

The caller's agent awaits the task from a tool; the human reached over SIP "answers" when the
fake server gets ``CreateSIPParticipant`` (they join the consultation room) and talks by chat
there. Every test runs a whole job: ``run_job`` returning proves the job's sessions, the
consultation leg and the bridge calls all ended.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
from fake_twirp import FakeTwirpServer, TwirpFailure, token_room
from livekit import rtc
from prebuilt_helpers import Parent, call

import agents_trio
from agents_trio import AgentSession, ChatContext, ToolError
from agents_trio.beta.workflows import WarmTransferResult, WarmTransferTask
from agents_trio.testing import FakeActions, FakeLLM, FakeRemoteParticipant, FakeRoom
from agents_trio.testing.fake_room import open_fake_room

KEY, SECRET = "devkey", "devsecret-devsecret-devsecret-devsecret"
HUMAN = "human-agent-sip"
SIP = rtc.ParticipantKind.PARTICIPANT_KIND_SIP


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVEKIT_API_KEY", KEY)
    monkeypatch.setenv("LIVEKIT_API_SECRET", SECRET)
    monkeypatch.delenv("LIVEKIT_SIP_OUTBOUND_TRUNK", raising=False)
    monkeypatch.delenv("LIVEKIT_SIP_NUMBER", raising=False)
    monkeypatch.delenv("LIVEKIT_URL", raising=False)


class Consultations:
    """Opens the consultation rooms as FakeRooms named as the token says; remembers them."""

    def __init__(self) -> None:
        self.rooms: list[FakeRoom] = []
        self.opened = trio.Event()

    def opener(self) -> Callable[..., Any]:
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def open_consultation(url: str, token: str, **_: object) -> Any:
            room = FakeRoom(name=token_room(token, KEY, SECRET), agent_identity="agent")
            self.rooms.append(room)
            self.opened.set()
            try:
                yield room
            finally:
                room.connected = False
        return open_consultation


def transfer_task(consultations: Consultations, **kwargs: Any) -> WarmTransferTask:
    if "sip_connection" not in kwargs:
        kwargs.setdefault("sip_trunk_id", "ST_trunk")
    kwargs.setdefault("hold_audio", None)
    task = WarmTransferTask("+15105550123", **kwargs)
    task.open_consultation_room = consultations.opener()  # type: ignore[method-assign]
    return task


async def run_transfer(server: FakeTwirpServer, parent: Parent, a: FakeActions,
                       drive: Callable[[agents_trio.JobContext, AgentSession], Any], *,
                       llm: FakeLLM | None = None,
                       prepare: Callable[[AgentSession], None] | None = None) -> None:
    """Run a job whose session says "go" (the parent's tool awaits the task), then ``drive``;
    the job ends when ``drive`` returned and the session closed."""
    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        async with AgentSession(llm=llm or FakeLLM(a.llm_responses)) as session:
            if prepare is not None:
                prepare(session)
            await session.start(parent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: session.run(user_input="go"))
                await drive(ctx, session)
                nursery.cancel_scope.cancel()

    with trio.fail_after(120):
        await agents_trio.run_job(entrypoint, url=server.url, token="t",
                                  open_room_fn=open_fake_room)


def answering(consultations: Consultations, bridge_of: list[Any]) -> Any:
    """A CreateSIPParticipant handler: the human joins the consultation room, then it answers."""
    async def answer(request: Any) -> Any:
        from livekit.protocol import sip as sip_pb
        room = consultations.rooms[-1]
        bridge_of[0].call_soon(room.join, FakeRemoteParticipant(HUMAN, kind=SIP))
        return sip_pb.SIPParticipantInfo(participant_identity=HUMAN, room_name=room.name)
    return answer


async def wait_result(parent: Parent) -> object:
    while not parent.results:
        await trio.sleep(0.05)
    return parent.results[0]


async def test_a_transfer_dials_briefs_moves_and_deletes_as_livekit(
        autojump_clock: object, monkeypatch: pytest.MonkeyPatch) -> None:
    consultations = Consultations()
    history = ChatContext()
    history.add_message(role="user", content="My parcel never came")
    history.add_message(role="assistant", content="Let me get a colleague")
    parent = Parent(lambda: transfer_task(consultations, chat_ctx=history))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("", tool_calls=call("connect_to_caller", "c1"), input="I can take it")
    a.add_llm("done", input="captured")
    llm = FakeLLM(a.llm_responses)
    bridge_of: list[Any] = []
    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        server.handlers["CreateSIPParticipant"] = answering(consultations, bridge_of)
        await nursery.start(server.serve)
        monkeypatch.setenv("LIVEKIT_URL", server.url.replace("http", "ws"))

        async def drive(ctx: agents_trio.JobContext, session: AgentSession) -> None:
            bridge_of.append(ctx.bridge)
            await server.wait_for_calls(1)  # dialed (the human joins as it answers)
            room = consultations.rooms[0]
            await room.wait_for(lambda: HUMAN in room.remote_participants)
            ctx.bridge.call_soon(room.send_chat, HUMAN, "I can take it")
            result = await wait_result(parent)
            assert result == WarmTransferResult(human_agent_identity=HUMAN)
            await server.wait_for_calls(3)  # the consultation room deleted
            # the caller hangs up after the transfer: the caller's room is deleted
            caller = FakeRemoteParticipant("caller")
            ctx.bridge.call_soon(ctx.room.join, caller)
            ctx.bridge.call_soon(ctx.room.leave, caller, rtc.DisconnectReason.CLIENT_INITIATED)
            await server.wait_for_calls(4)

        await run_transfer(server, parent, a, drive, llm=llm)
        nursery.cancel_scope.cancel()

    assert server.methods() == ["CreateSIPParticipant", "MoveParticipant", "DeleteRoom",
                                "DeleteRoom"]
    dial, move, delete_consultation, delete_caller = (c.request for c in server.calls)
    assert (dial.sip_trunk_id, dial.sip_call_to, dial.room_name, dial.participant_identity,
            dial.wait_until_answered) == ("ST_trunk", "+15105550123",
                                          "test-room-human-agent", HUMAN, True)
    assert (move.room, move.identity, move.destination_room) == (
        "test-room-human-agent", HUMAN, "test-room")
    assert delete_consultation.room == "test-room-human-agent"
    assert delete_caller.room == "test-room"
    assert not consultations.rooms[0].connected
    # the consultation's model was briefed with the caller conversation and offered the
    # task's tools
    consult = next(c for c in llm.calls
                   if c["chat_ctx"].items[-1].text_content == "I can take it")
    briefing = consult["chat_ctx"].items[0].text_content
    assert "Caller: My parcel never came\nAssistant: Let me get a colleague\n" in briefing
    assert {t.name for t in consult["tools"]} == {"connect_to_caller", "decline_transfer",
                                                  "voicemail_detected"}


async def test_failing_to_dial_returns_to_the_caller_with_livekits_error(
        autojump_clock: object, monkeypatch: pytest.MonkeyPatch) -> None:
    consultations = Consultations()
    parent = Parent(lambda: transfer_task(consultations))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("sorry", input="failed: could not dial human agent")
    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()

        async def busy(request: Any) -> Any:
            raise TwirpFailure(404, "not_found", "callee busy")
        server.handlers["CreateSIPParticipant"] = busy
        await nursery.start(server.serve)
        # the job's URL is the server's (no LIVEKIT_URL)

        async def drive(ctx: agents_trio.JobContext, session: AgentSession) -> None:
            result = await wait_result(parent)
            assert isinstance(result, ToolError)
            assert result.message == "could not dial human agent"
            await server.wait_for_calls(2)

        await run_transfer(server, parent, a, drive)
        nursery.cancel_scope.cancel()
    assert server.methods() == ["CreateSIPParticipant", "DeleteRoom"]
    assert not consultations.rooms[0].connected


@pytest.mark.parametrize(("says", "tool", "error"), [
    ("not now", call("decline_transfer", "d1", reason="busy"),
     "human agent declined to connect: busy"),
    ("beep", call("voicemail_detected", "v1"), "voicemail detected"),
])
async def test_the_human_declining_or_voicemail_fails_the_task(
        autojump_clock: object, monkeypatch: pytest.MonkeyPatch, says: str,
        tool: Any, error: str) -> None:
    consultations = Consultations()
    parent = Parent(lambda: transfer_task(consultations))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("", tool_calls=tool, input=says)
    a.add_llm("sorry", input=f"failed: {error}")
    bridge_of: list[Any] = []
    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        server.handlers["CreateSIPParticipant"] = answering(consultations, bridge_of)
        await nursery.start(server.serve)
        monkeypatch.setenv("LIVEKIT_URL", server.url)

        async def drive(ctx: agents_trio.JobContext, session: AgentSession) -> None:
            bridge_of.append(ctx.bridge)
            await server.wait_for_calls(1)
            room = consultations.rooms[0]
            await room.wait_for(lambda: HUMAN in room.remote_participants)
            ctx.bridge.call_soon(room.send_chat, HUMAN, says)
            result = await wait_result(parent)
            assert isinstance(result, ToolError) and result.message == error
            await server.wait_for_calls(2)

        await run_transfer(server, parent, a, drive)
        nursery.cancel_scope.cancel()
    assert server.methods() == ["CreateSIPParticipant", "DeleteRoom"]


async def test_the_human_hanging_up_returns_to_the_caller(
        autojump_clock: object, monkeypatch: pytest.MonkeyPatch) -> None:
    consultations = Consultations()
    parent = Parent(lambda: transfer_task(consultations))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("sorry", input="failed: room closed: ROOM_DELETED")
    bridge_of: list[Any] = []
    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        server.handlers["CreateSIPParticipant"] = answering(consultations, bridge_of)
        await nursery.start(server.serve)
        monkeypatch.setenv("LIVEKIT_URL", server.url)

        async def drive(ctx: agents_trio.JobContext, session: AgentSession) -> None:
            bridge_of.append(ctx.bridge)
            await server.wait_for_calls(1)
            room = consultations.rooms[0]
            await room.wait_for(lambda: HUMAN in room.remote_participants)
            ctx.bridge.call_soon(room.leave, room.remote_participants[HUMAN],
                                 rtc.DisconnectReason.CLIENT_INITIATED)
            result = await wait_result(parent)
            assert isinstance(result, ToolError)
            assert result.message == "room closed: ROOM_DELETED"
            await server.wait_for_calls(2)

        await run_transfer(server, parent, a, drive)
        nursery.cancel_scope.cancel()
    assert server.methods() == ["CreateSIPParticipant", "DeleteRoom"]


async def test_the_consultation_room_dropping_returns_to_the_caller(
        autojump_clock: object, monkeypatch: pytest.MonkeyPatch) -> None:
    consultations = Consultations()
    parent = Parent(lambda: transfer_task(consultations))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("sorry", input="failed: room closed: SIGNAL_CLOSE")
    bridge_of: list[Any] = []
    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        server.handlers["CreateSIPParticipant"] = answering(consultations, bridge_of)
        await nursery.start(server.serve)
        monkeypatch.setenv("LIVEKIT_URL", server.url)

        async def drive(ctx: agents_trio.JobContext, session: AgentSession) -> None:
            bridge_of.append(ctx.bridge)
            await server.wait_for_calls(1)
            room = consultations.rooms[0]
            await room.wait_for(lambda: HUMAN in room.remote_participants)
            ctx.bridge.call_soon(room.drop)
            result = await wait_result(parent)
            assert isinstance(result, ToolError)
            assert result.message == "room closed: SIGNAL_CLOSE"

        await run_transfer(server, parent, a, drive)
        nursery.cancel_scope.cancel()
    assert server.methods()[0] == "CreateSIPParticipant"


@pytest.mark.parametrize("moment", ["ringing", "consulting"])
async def test_the_caller_session_closing_at_any_moment_leaves_nothing_running(
        autojump_clock: object, monkeypatch: pytest.MonkeyPatch, moment: str) -> None:
    consultations = Consultations()
    parent = Parent(lambda: transfer_task(consultations))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    bridge_of: list[Any] = []
    ringing = trio.Event()
    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        if moment == "ringing":
            async def rings_forever(request: Any) -> Any:
                ringing.set()
                await trio.sleep_forever()
            server.handlers["CreateSIPParticipant"] = rings_forever
        else:
            server.handlers["CreateSIPParticipant"] = answering(consultations, bridge_of)
        await nursery.start(server.serve)
        monkeypatch.setenv("LIVEKIT_URL", server.url)

        async def drive(ctx: agents_trio.JobContext, session: AgentSession) -> None:
            bridge_of.append(ctx.bridge)
            await server.wait_for_calls(1)
            if moment == "consulting":
                room = consultations.rooms[0]
                await room.wait_for(lambda: HUMAN in room.remote_participants)
            await session.aclose()

        await run_transfer(server, parent, a, drive)
        nursery.cancel_scope.cancel()
    # the consultation room was left and deleted; the awaiter got the task's cancellation
    assert not consultations.rooms[0].connected
    assert server.methods()[-1] == "DeleteRoom"
    assert parent.results and isinstance(parent.results[0], ToolError)


def test_bad_arguments_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="sip_call_to"):
        WarmTransferTask(sip_trunk_id="ST_x")
    with pytest.raises(ValueError, match="LIVEKIT_SIP_OUTBOUND_TRUNK"):
        WarmTransferTask("+1555")
    with pytest.raises(ValueError, match="ringing_timeout"):
        WarmTransferTask("+1555", sip_trunk_id="ST_x", ringing_timeout=-1)
    monkeypatch.setenv("LIVEKIT_SIP_OUTBOUND_TRUNK", "ST_env")
    assert WarmTransferTask("+1555").sip_trunk_id == "ST_env"
    assert WarmTransferTask("+1555", sip_connection=object()).sip_trunk_id is None
    assert WarmTransferTask(target_phone_number="+1666").sip_call_to == "+1666"


async def _livekit_requests(server_url: str, options: dict[str, Any], *, caller_room: str,
                            consultation_room: str, monkeypatch: pytest.MonkeyPatch
                            ) -> list[Any]:
    """What LiveKit 1.8.9's own WarmTransferTask sends for the dial and the move, its methods
    run on the bridge against ``server_url`` with a stand-in job context (its ``api`` is a
    real ``LiveKitAPI``). Returns nothing: the server records the requests."""
    from types import SimpleNamespace

    from livekit import api
    from livekit.agents.beta.workflows import warm_transfer as lk_warm_transfer

    from agents_trio.io.bridge import current_bridge

    bridge = current_bridge()
    client = await bridge.run_sync(api.LiveKitAPI, server_url, KEY, SECRET)
    monkeypatch.setattr(lk_warm_transfer, "get_job_context",
                        lambda: SimpleNamespace(api=client))
    task = await bridge.run_sync(lk_warm_transfer.WarmTransferTask, "+15105550123",
                                 hold_audio=None, **options)
    try:
        await bridge.run(task._originate_human_agent, room_name=consultation_room,
                         identity=HUMAN, room=None)
        task._caller_room = SimpleNamespace(name=caller_room)
        human_room = SimpleNamespace(name=consultation_room, off=lambda *a: None)
        task._human_agent_sess = SimpleNamespace(room_io=SimpleNamespace(room=human_room))
        await bridge.run(task._merge_calls)
    finally:
        await bridge.run(client.aclose)
    return []


@pytest.mark.parametrize("options", [
    {"sip_trunk_id": "ST_trunk"},
    {"sip_trunk_id": "ST_trunk", "sip_number": "+14155550100", "dtmf": "ww12#",
     "sip_headers": {"X-Ticket": "42", "X-Queue": "billing"}, "ringing_timeout": 20.5},
    {"sip_connection": "custom"},
])
async def test_the_dial_and_the_move_are_the_requests_livekits_task_sends(
        autojump_clock: object, monkeypatch: pytest.MonkeyPatch,
        options: dict[str, Any]) -> None:
    from livekit import api
    if options.get("sip_connection") == "custom":
        options = {"sip_connection": api.SIPOutboundConfig(
            hostname="sip.example.com", auth_username="u", auth_password="p")}
    consultations = Consultations()
    parent = Parent(lambda: transfer_task(consultations, **options))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("", tool_calls=call("connect_to_caller", "c1"), input="yes")
    a.add_llm("done", input="captured")
    bridge_of: list[Any] = []
    ours, theirs = FakeTwirpServer(), FakeTwirpServer()
    async with trio.open_nursery() as nursery:
        ours.handlers["CreateSIPParticipant"] = answering(consultations, bridge_of)
        await nursery.start(ours.serve)
        await nursery.start(theirs.serve)
        monkeypatch.setenv("LIVEKIT_URL", ours.url)

        async def drive(ctx: agents_trio.JobContext, session: AgentSession) -> None:
            bridge_of.append(ctx.bridge)
            await ours.wait_for_calls(1)
            room = consultations.rooms[0]
            await room.wait_for(lambda: HUMAN in room.remote_participants)
            ctx.bridge.call_soon(room.send_chat, HUMAN, "yes")
            await wait_result(parent)
            await _livekit_requests(theirs.url, options, caller_room=ctx.room.name,
                                    consultation_room=room.name, monkeypatch=monkeypatch)

        await run_transfer(ours, parent, a, drive)
        nursery.cancel_scope.cancel()
    assert parent.results == [WarmTransferResult(human_agent_identity=HUMAN)]
    assert theirs.methods() == ["CreateSIPParticipant", "MoveParticipant"]
    assert ours.methods()[:2] == theirs.methods()
    for mine, livekits in zip(ours.calls, theirs.calls):
        assert mine.request == livekits.request, mine.method


async def test_on_hold_the_caller_hears_hold_music_and_its_session_io_is_off(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The hold audio is a short file, decoded in a thread: this test runs in real time (on
    the autojump clock virtual time ran on while the thread worked, and the job's shutdown
    grace could expire before the player's thread was joined); it waits on witnesses only
    and asserts no durations."""
    import wave

    from agents_trio import AudioConfig
    from agents_trio.testing import FakeAudioOutput, FakeTextOutput
    music = tmp_path / "hold.wav"
    with wave.open(str(music), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(48000)
        w.writeframes(b"\x10\x00" * 4800)
    consultations = Consultations()
    tasks: list[WarmTransferTask] = []

    def make() -> WarmTransferTask:
        tasks.append(transfer_task(consultations, hold_audio=AudioConfig(str(music))))
        return tasks[-1]
    parent = Parent(make)
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("", tool_calls=call("decline_transfer", "d1", reason="busy"), input="no")
    a.add_llm("sorry", input="failed: human agent declined to connect: busy")
    bridge_of: list[Any] = []
    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        server.handlers["CreateSIPParticipant"] = answering(consultations, bridge_of)
        await nursery.start(server.serve)
        monkeypatch.setenv("LIVEKIT_URL", server.url)

        async def drive(ctx: agents_trio.JobContext, session: AgentSession) -> None:
            bridge_of.append(ctx.bridge)
            await server.wait_for_calls(1)
            # the hold music's track, in the caller's room
            assert len(ctx.room.local_participant.published) == 1
            # the caller's session outputs are off meanwhile (it has no audio input)
            assert (session.input.audio_enabled, session.output.audio_enabled,
                    session.output.transcription_enabled) == (True, False, False)
            room = consultations.rooms[0]
            await room.wait_for(lambda: HUMAN in room.remote_participants)
            ctx.bridge.call_soon(room.send_chat, HUMAN, "no")
            await server.wait_for_calls(2)  # declined: the consultation room is deleted
            # the hold ended: its track is gone (and with the player its decoding thread)
            await ctx.room.wait_for(lambda: not ctx.room.local_participant.published)
            # back to how they were: audio on, the transcription still off
            assert (session.input.audio_enabled, session.output.audio_enabled,
                    session.output.transcription_enabled) == (True, True, False)
            assert str(await wait_result(parent)) == "human agent declined to connect: busy"

        def prepare(session: AgentSession) -> None:
            session.output.audio = FakeAudioOutput()
            session.output.transcription = FakeTextOutput()
            session.output.set_transcription_enabled(False)

        await run_transfer(server, parent, a, drive, prepare=prepare)
        nursery.cancel_scope.cancel()


async def test_outside_a_job_the_task_fails_instead_of_hanging(autojump_clock: object) -> None:
    parent = Parent(lambda: transfer_task(Consultations()))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("sorry", input="failed: could not dial human agent")
    with trio.fail_after(60):
        async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
            await session.start(parent)
            await session.run(user_input="go")
    assert [str(r) for r in parent.results] == ["could not dial human agent"]
