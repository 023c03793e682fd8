"""Against a real LiveKit server: run only when LIVEKIT_URL, LIVEKIT_API_KEY and
LIVEKIT_API_SECRET are set (e.g. ``livekit-server --dev`` gives ws://localhost:7880 with
devkey/secret), skipped otherwise.

A second connection on the same bridge plays the user: it publishes a microphone, reads the
agent's transcription stream and state attribute, and leaves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents_trio import Agent, AgentSession, open_bridge
from agents_trio.io.room import RoomConnectError, mint_token, open_room, open_room_io
from agents_trio.testing import FakeLLM, FakeTTS
from agents_trio.testing.actions import FakeLLMResponse, FakeTTSResponse
import trio
from livekit import rtc

URL = os.environ.get("LIVEKIT_URL")
KEY = os.environ.get("LIVEKIT_API_KEY")
SECRET = os.environ.get("LIVEKIT_API_SECRET")

pytestmark = pytest.mark.skipif(
    not (URL and KEY and SECRET),
    reason="needs a LiveKit server: set LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET")


ROOT = Path(__file__).resolve().parents[1]


class Greeter(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="greet")

    async def on_enter(self) -> None:
        self.session.say("Hello from agents trio.")


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.05)


async def test_agent_and_user_talk_through_a_real_room() -> None:
    room_name = f"agents-trio-{uuid.uuid4().hex[:8]}"
    agent_token = mint_token(KEY, SECRET, room=room_name, identity="agent")
    user_token = mint_token(KEY, SECRET, room=room_name, identity="user", kind="standard")
    session = AgentSession(
        llm=FakeLLM([FakeLLMResponse(input="hello", content="Hi!")]),
        tts=FakeTTS([FakeTTSResponse(input="Hello from agents trio.", audio_duration=0.5),
                     FakeTTSResponse(input="Hi!", audio_duration=0.3)]))
    with trio.fail_after(60):
        async with open_bridge() as bridge, open_room(URL, agent_token) as agent_room, \
                open_room(URL, user_token) as user_room:
            texts: list[str] = []

            async def on_text(reader: Any, identity: str) -> None:
                texts.append(await reader.read_all())

            push, streams = bridge.callback_channel()
            user_room.register_text_stream_handler("lk.transcription",
                                                   lambda r, i: push(r, i))
            mic = await bridge.run_sync(rtc.AudioSource, 24000, 1)
            track = await bridge.run_sync(rtc.LocalAudioTrack.create_audio_track, "mic", mic)
            await bridge.run(user_room.local_participant.publish_track, track,
                             rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))
            async with trio.open_nursery() as nursery:
                async def read_texts() -> None:
                    async for reader, identity in streams:
                        nursery.start_soon(on_text, reader, identity)

                nursery.start_soon(read_texts)
                async with open_room_io(agent_room, session) as rio, session:
                    await session.start(Greeter())
                    await rio.wait_for_participant()
                    for _ in range(20):
                        await bridge.run(mic.capture_frame, rtc.AudioFrame(
                            np.full(480, 300, dtype=np.int16).tobytes(), 24000, 1, 480))
                    await _until(lambda: "Hello from agents trio." in texts)
                    agent = user_room.remote_participants["agent"]
                    await _until(lambda: agent.attributes.get("lk.agent.state") == "listening")
                    await bridge.run(user_room.local_participant.send_text, "hello",
                                     topic="lk.chat")
                    await _until(lambda: "Hi!" in texts)
                    await bridge.run(user_room.disconnect)
                    assert await rio.wait_session_closed() == "participant_disconnected"
                nursery.cancel_scope.cancel()
            await bridge.run(mic.aclose)


async def test_a_wrong_secret_is_rejected_by_the_server() -> None:
    token = mint_token(KEY, "not-the-secret-" + "x" * 32, room="r", identity="agent")
    async with open_bridge() as bridge:
        with pytest.raises(RoomConnectError, match="rejected the token"):
            async with open_room(URL, token):
                pass
        assert bridge.statistics().asyncio_tasks == 0


def test_the_worker_takes_a_dispatched_job() -> None:
    pytest.importorskip("livekit.agents", reason="worker mode needs livekit-agents")
    agent_name = f"agents-trio-test-{uuid.uuid4().hex[:6]}"
    room_name = f"agents-trio-{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen(
        [sys.executable, "-m", "agents_trio", "worker", "examples/livekit_agent.py", "dev",
         "--agent-name", agent_name], cwd=ROOT)
    try:
        trio.run(_dispatch_and_wait_for_agent, agent_name, room_name)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_a_pool_of_worker_processes_takes_dispatched_jobs() -> None:
    """``--processes 2``: two registered workers, each with its job host; two rooms get an
    agent each, whichever process LiveKit picks."""
    pytest.importorskip("livekit.agents", reason="worker mode needs livekit-agents")
    agent_name = f"agents-trio-test-{uuid.uuid4().hex[:6]}"
    pool = subprocess.Popen(
        [sys.executable, "-m", "agents_trio", "worker", "examples/livekit_agent.py", "start",
         "--processes", "2", "--port", "0", "--agent-name", agent_name], cwd=ROOT)
    try:
        for _ in range(2):
            trio.run(_dispatch_and_wait_for_agent, agent_name,
                     f"agents-trio-{uuid.uuid4().hex[:8]}")
    finally:
        pool.terminate()  # the supervisor forwards it: both processes drain and exit
        assert pool.wait(timeout=60) == 0


async def _dispatch_and_wait_for_agent(agent_name: str, room_name: str) -> None:
    from livekit import api

    user_token = mint_token(KEY, SECRET, room=room_name, identity="user", kind="standard")
    async with open_bridge() as bridge, open_room(URL, user_token) as user_room:
        await trio.sleep(3)  # the worker registers
        lkapi = await bridge.run_sync(api.LiveKitAPI, URL, KEY, SECRET)
        try:
            await bridge.run(lkapi.agent_dispatch.create_dispatch,
                             api.CreateAgentDispatchRequest(agent_name=agent_name,
                                                            room=room_name))
        finally:
            await bridge.run(lkapi.aclose)
        await _until(lambda: any(
            p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT
            for p in user_room.remote_participants.values()), timeout=30)
