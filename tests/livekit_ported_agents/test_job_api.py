"""``ctx.api`` (LiveKit's ``JobContext.api``), which LiveKit's ``multi_agent.py`` uses to hang
up: ``await get_current_job_context().api.room.delete_room(api.DeleteRoomRequest(room=...))``.
Against a fake LiveKit server API (real Twirp over HTTP, ``tests/prebuilt/fake_twirp.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from livekit import api

import agents_trio
from agents_trio.job import get_current_job_context
from agents_trio.testing.fake_room import open_fake_room

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "prebuilt"))
from fake_twirp import FakeTwirpServer  # noqa: E402

KEY, SECRET = "devkey", "devsecret-devsecret-devsecret-devsecret"


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVEKIT_API_KEY", KEY)
    monkeypatch.setenv("LIVEKIT_API_SECRET", SECRET)


async def test_job_api_calls_the_server_from_trio_as_multi_agent_hangs_up() -> None:
    replies: list[Any] = []

    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        job_ctx = get_current_job_context()
        assert job_ctx.api is job_ctx.api  # one client per job, as LiveKit's cached property
        replies.append(await job_ctx.api.room.delete_room(
            api.DeleteRoomRequest(room=job_ctx.room.name)))

    async with trio.open_nursery() as nursery:
        server = FakeTwirpServer()
        await nursery.start(server.serve)
        with trio.fail_after(30):
            await agents_trio.run_job(entrypoint, url=server.url, token="t",
                                      open_room_fn=open_fake_room)
        nursery.cancel_scope.cancel()
    assert server.methods() == ["DeleteRoom"]
    assert server.calls[0].request.room == "test-room"
    assert type(replies[0]).__name__ == "DeleteRoomResponse"


async def test_job_api_names_only_livekits_services_and_methods() -> None:
    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        assert callable(ctx.api.sip.create_sip_participant)
        with pytest.raises(AttributeError):
            ctx.api.rooms  # noqa: B018 - not a service of LiveKitAPI
        with pytest.raises(AttributeError):
            ctx.api.room.remove_room  # noqa: B018 - not a method of RoomService

    with trio.fail_after(30):
        await agents_trio.run_job(entrypoint, url="http://127.0.0.1:9", token="t",
                                  open_room_fn=open_fake_room)
