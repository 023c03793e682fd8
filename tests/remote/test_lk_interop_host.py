"""LiveKit's own asyncio RemoteSession (livekit-agents, TcpSessionTransport) drives an
agents_trio agent served by agents_trio.remote.lk.SessionHost over TCP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio

pytest.importorskip("livekit.agents")

from livekit.protocol.agent_pb import agent_session as pb  # noqa: E402

from agents_trio.remote import lk  # noqa: E402
from lk_helpers import lk_remote_session, run_asyncio  # noqa: E402
from remote_helpers import Weather, text_session  # noqa: E402


async def test_livekit_remote_session_drives_our_host() -> None:
    session = text_session(fast=True)
    with trio.fail_after(30):
        async with session, lk.open_session_host(session, port=0) as host:
            await session.start(Weather())
            port = host.port
            assert port is not None

            async def drive() -> dict[str, Any]:
                remote = lk_remote_session(port)
                seen: list[str] = []
                added: list[Any] = []
                remote.on("agent_state_changed", lambda ev: seen.append("agent_state_changed"))
                remote.on("conversation_item_added", lambda ev: added.append(ev))
                tools_executed: list[Any] = []
                remote.on("function_tools_executed", lambda ev: tools_executed.append(ev))
                usage: list[Any] = []
                remote.on("session_usage_updated", usage.append)
                await remote.start()
                try:
                    await remote.wait_for_ready(timeout=5.0)
                    ran = await remote.run("weather in Paris?", timeout=10.0)
                    history = await remote.get_chat_history()
                    info = await remote.get_agent_info()
                    state = await remote.get_session_state()
                    framework = await remote.get_framework_info()
                    await remote.update_io(output_audio_enabled=False)
                    fin = await remote.finalize_simulation(provisional_success=True)
                    failed = None
                    try:
                        await remote.run("boom", timeout=10.0)
                    except RuntimeError as e:
                        failed = str(e)
                    await asyncio.sleep(0.2)  # the events of the last turn
                    return {"ran": ran, "history": history, "info": info, "state": state,
                            "framework": framework, "fin": fin, "failed": failed,
                            "seen": seen, "added": added, "tools": tools_executed,
                            "usage": usage}
                finally:
                    await remote.aclose()

            out = await run_asyncio(drive)

    ran = out["ran"]
    kinds = [i.WhichOneof("item") for i in ran.items]
    assert kinds == ["message", "function_call", "function_call_output", "message"], kinds
    calls = [i.function_call for i in ran.items if i.WhichOneof("item") == "function_call"]
    assert calls[0].name == "get_weather" and calls[0].call_id == "c1"
    outputs = [i.function_call_output for i in ran.items
               if i.WhichOneof("item") == "function_call_output"]
    assert outputs[0].output == "sunny in Paris"
    texts = [i.message.content[0].text for i in ran.items
             if i.WhichOneof("item") == "message" and i.message.role == pb.ASSISTANT]
    assert "It is sunny in Paris." in texts

    history = out["history"]
    user = [i.message for i in history.items if i.WhichOneof("item") == "message"
            and i.message.role == pb.USER]
    assert [m.content[0].text for m in user][:1] == ["weather in Paris?"]
    assert len(history.items) >= len(ran.items)

    info = out["info"]
    assert info.instructions == "You answer weather questions."
    assert "get_weather" in list(info.tools)
    assert info.id == out["state"].agent_id
    assert out["state"].agent_state in (pb.AS_LISTENING, pb.AS_IDLE)
    assert out["framework"].sdk == "python"
    assert not out["fin"].HasField("user_verdict")
    assert out["failed"] is not None and "the model is down" in out["failed"]

    assert "agent_state_changed" in out["seen"]
    added_kinds = {ev.conversation_item_added.item.WhichOneof("item") for ev in out["added"]}
    assert "message" in added_kinds
    assert out["tools"] and out["tools"][0].function_tools_executed.function_calls[0].name \
        == "get_weather"
    last_usage = out["usage"][-1].session_usage_updated.usage
    assert [u.WhichOneof("usage") for u in last_usage.model_usage] == ["llm"]


async def test_livekit_wait_for_ready_waits_for_our_agent_to_start() -> None:
    """Our host answers ping only once the session runs an agent; LiveKit's wait_for_ready
    retries through the "not started" answers and returns once it does."""
    session = text_session(fast=True)
    with trio.fail_after(30):
        async with session, lk.open_session_host(session, port=0) as host:
            port = host.port
            assert port is not None
            started = trio.Event()

            async def drive() -> float:
                import time
                remote = lk_remote_session(port)
                await remote.start()
                try:
                    t0 = time.monotonic()
                    await remote.wait_for_ready(timeout=10.0, retry_interval=0.1)
                    return time.monotonic() - t0
                finally:
                    await remote.aclose()

            async def start_late() -> None:
                await trio.sleep(0.5)
                await session.start(Weather())
                started.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(start_late)
                waited = await run_asyncio(drive)
            assert started.is_set()
    assert waited >= 0.4
