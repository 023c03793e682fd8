"""The job context's server calls (LiveKit's ``ctx.delete_room()``,
``ctx.add_sip_participant()``, ``ctx.transfer_sip_participant()``) and
``RoomOptions(delete_room_on_close=True)``, against a fake LiveKit server API (real Twirp over
HTTP, see fake_twirp). ``run_job`` returning shows the job waited for its calls."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
from livekit.protocol import sip as sip_pb

import agents_trio
from agents_trio import Agent, AgentSession, RoomOptions
from agents_trio.testing import FakeLLM, FakeRemoteParticipant
from agents_trio.testing.fake_room import open_fake_room
from fake_twirp import FakeTwirpServer, TwirpFailure

KEY, SECRET = "devkey", "devsecret-devsecret-devsecret-devsecret"


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVEKIT_API_KEY", KEY)
    monkeypatch.setenv("LIVEKIT_API_SECRET", SECRET)


async def _job(server: FakeTwirpServer, entrypoint: Any) -> None:
    with trio.fail_after(60):
        await agents_trio.run_job(entrypoint, url=server.url, token="t",
                                  open_room_fn=open_fake_room)


async def test_delete_room_runs_in_the_job_and_the_job_waits_for_it(autojump_clock) -> None:
    seen: list[Any] = []

    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        seen.append(ctx.delete_room())          # not awaited: the job still waits for it
        seen.append(ctx.delete_room("other-room"))

    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        await nursery.start(server.serve)
        await _job(server, entrypoint)
        nursery.cancel_scope.cancel()
    assert [r.done() for r in seen] == [True, True]
    assert sorted(c.request.room for c in server.calls) == ["other-room", "test-room"]
    assert server.methods() == ["DeleteRoom", "DeleteRoom"]


async def test_a_room_already_gone_is_no_error_and_other_failures_are_logged(
        autojump_clock, caplog: pytest.LogCaptureFixture) -> None:
    async def fail(request: Any) -> Any:
        code = "not_found" if request.room == "gone" else "internal"
        raise TwirpFailure(404 if code == "not_found" else 500, code, "no")

    results: list[Any] = []

    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        results.append(await ctx.delete_room("gone"))
        results.append(await ctx.delete_room("broken"))

    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer(handlers={"DeleteRoom": fail})
        await nursery.start(server.serve)
        with caplog.at_level(logging.WARNING, logger="agents_trio.job"):
            await _job(server, entrypoint)
        nursery.cancel_scope.cancel()
    assert results == [None, None]
    warnings = [r.getMessage() for r in caplog.records if "deleting room" in r.getMessage()]
    assert len(warnings) == 1 and "broken" in warnings[0]


async def test_sip_calls_send_livekits_requests_and_answer_the_awaiter(autojump_clock) -> None:
    async def created(request: Any) -> Any:
        return sip_pb.SIPParticipantInfo(participant_identity=request.participant_identity,
                                         room_name=request.room_name)

    infos: list[Any] = []

    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        infos.append(await ctx.add_sip_participant(
            call_to="+15105550123", trunk_id="ST_out", participant_identity="callee"))
        infos.append(await ctx.transfer_sip_participant("callee", "tel:+18003310500"))
        with pytest.raises(ValueError, match="not a SIP participant"):
            ctx.transfer_sip_participant(FakeRemoteParticipant("web-user"),  # type: ignore[arg-type]
                                         "tel:+1")

    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer(handlers={"CreateSIPParticipant": created})
        await nursery.start(server.serve)
        await _job(server, entrypoint)
        nursery.cancel_scope.cancel()
    create, transfer = server.calls
    assert (create.method, create.request.sip_call_to, create.request.sip_trunk_id,
            create.request.room_name, create.request.participant_identity,
            create.request.participant_name) == (
        "CreateSIPParticipant", "+15105550123", "ST_out", "test-room", "callee",
        "SIP-participant")
    assert (transfer.method, transfer.request.participant_identity,
            transfer.request.transfer_to, transfer.request.room_name,
            transfer.request.play_dialtone) == (
        "TransferSIPParticipant", "callee", "tel:+18003310500", "test-room", False)
    assert infos[0].participant_identity == "callee"


async def test_a_failed_sip_call_raises_to_its_awaiter(autojump_clock) -> None:
    async def refuse(request: Any) -> Any:
        raise TwirpFailure(400, "invalid_argument", "no such trunk")

    errors: list[BaseException] = []

    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        try:
            await ctx.add_sip_participant(call_to="+1", trunk_id="nope",
                                          participant_identity="x")
        except Exception as e:
            errors.append(e)

    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer(handlers={"CreateSIPParticipant": refuse})
        await nursery.start(server.serve)
        await _job(server, entrypoint)
        nursery.cancel_scope.cancel()
    assert len(errors) == 1 and "no such trunk" in str(errors[0])


async def test_delete_room_on_close_deletes_the_room_when_the_session_closes(
        autojump_clock) -> None:
    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        session = AgentSession(llm=FakeLLM([]))
        await session.start(Agent(instructions="x"), room=ctx.room,
                            room_options=RoomOptions(delete_room_on_close=True))
        await trio.sleep(1)
        assert server.calls == []  # not while the session runs
        session.shutdown()

    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        await nursery.start(server.serve)
        await _job(server, entrypoint)
        nursery.cancel_scope.cancel()
    assert [(c.method, c.request.room) for c in server.calls] == [("DeleteRoom", "test-room")]


async def test_a_job_without_a_server_skips_its_calls_as_livekits_console(
        caplog: pytest.LogCaptureFixture) -> None:
    room = type("Room", (), {"name": "console"})()
    ctx = agents_trio.JobContext(bridge=None, room=room)  # type: ignore[arg-type]
    assert ctx.is_fake_job()
    with caplog.at_level(logging.WARNING, logger="agents_trio.job"):
        request = ctx.delete_room()
    assert request.done() and await request is None
    assert "not executed in console mode" in caplog.text


async def test_a_call_asked_for_in_a_shutdown_callback_runs_when_awaited(
        autojump_clock) -> None:
    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        async def on_shutdown() -> None:
            await ctx.delete_room()          # LiveKit's EndCallTool does this

        ctx.add_shutdown_callback(on_shutdown)

    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        await nursery.start(server.serve)
        await _job(server, entrypoint)
        nursery.cancel_scope.cancel()
    assert [(c.method, c.request.room) for c in server.calls] == [("DeleteRoom", "test-room")]
