"""WarmTransferTask against a real LiveKit server (skipped without LIVEKIT_URL,
LIVEKIT_API_KEY and LIVEKIT_API_SECRET): the job's room and the consultation room are real
connections, the server API calls are real Twirp requests.

Without a SIP trunk to dial, the dial must fail: the task returns to the caller with LiveKit's
error, and the consultation room (joined for real with the minted token) is deleted.
Not run where this was written (no server there).
"""

from __future__ import annotations

import os
import uuid

import pytest
import trio
from prebuilt_helpers import Parent, call

import agents_trio
from agents_trio import AgentSession, ToolError
from agents_trio.beta.workflows import WarmTransferTask
from agents_trio.io.server_api import open_server_api
from agents_trio.testing import FakeActions, FakeLLM

URL = os.environ.get("LIVEKIT_URL")
KEY = os.environ.get("LIVEKIT_API_KEY")
SECRET = os.environ.get("LIVEKIT_API_SECRET")

pytestmark = pytest.mark.skipif(
    not (URL and KEY and SECRET),
    reason="needs a LiveKit server: set LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET")


async def test_a_failing_dial_on_a_real_server_returns_to_the_caller() -> None:
    assert URL and KEY and SECRET
    parent = Parent(lambda: WarmTransferTask("+15105550123",
                                             sip_trunk_id=f"ST_missing_{uuid.uuid4().hex[:6]}",
                                             hold_audio=None))
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("sorry", input="failed: could not dial human agent")
    room_name = f"agents-trio-xfer-{uuid.uuid4().hex[:8]}"

    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
            await session.start(parent)
            await session.run(user_input="go")
            with trio.fail_after(30):
                while not parent.results:
                    await trio.sleep(0.1)
        async with open_server_api(URL, KEY, SECRET, bridge=ctx.bridge) as server:
            await server.delete_room(room_name)

    with trio.fail_after(60):
        await agents_trio.run_job(entrypoint, url=URL, api_key=KEY, api_secret=SECRET,
                                  room_name=room_name, identity="agent")
    assert len(parent.results) == 1 and isinstance(parent.results[0], ToolError)
    assert parent.results[0].message == "could not dial human agent"
