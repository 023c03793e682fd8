"""Our Trio RemoteSession (agents_trio.remote.lk) drives LiveKit's own AgentSession, served by
LiveKit's own SessionHost over its TcpSessionTransport (which dials out, as it does to a
console: our client accepts the connection)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

pytest.importorskip("livekit.agents")

from livekit.protocol.agent_pb import agent_session as pb  # noqa: E402

from agents_trio.chat import FunctionCall, FunctionCallOutput  # noqa: E402
from agents_trio.remote import lk  # noqa: E402
from lk_agents import lk_weather_session  # noqa: E402
from lk_helpers import Gate, run_asyncio  # noqa: E402


async def test_our_remote_session_drives_livekit_session_host() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listener = listeners[0]
    port = listener.socket.getsockname()[1]
    done = Gate()

    async def serve_livekit() -> None:
        from livekit.agents.voice.remote_session import SessionHost, TcpSessionTransport
        session, agent = lk_weather_session()
        await session.start(agent)
        host = SessionHost(TcpSessionTransport("127.0.0.1", port))
        host.register_session(session)
        await host.start()
        try:
            await done.wait()
        finally:
            await host.aclose()
            await session.aclose()

    events: list[pb.AgentSessionEvent] = []
    out: dict[str, Any] = {}
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_asyncio, serve_livekit)
            try:
                async with lk.accept_remote_session(listener) as remote:
                    remote.on("conversation_item_added", events.append)
                    await remote.wait_for_ready(timeout=10)
                    out["ran"] = await remote.run("weather in Paris?", timeout=20)
                    out["history"] = await remote.get_chat_history()
                    out["info"] = await remote.get_agent_info()
                    out["state"] = await remote.get_session_state()
                    out["framework"] = await remote.get_framework_info()
                    out["io"] = await remote.update_io(output_transcription_enabled=True)
                    out["fin"] = await remote.finalize_simulation(provisional_success=True)
                    with pytest.raises(lk.client.RemoteSessionError, match="empty run_input"):
                        await remote.run("")
            finally:
                done.set()
    await trio.aclose_forcefully(listener)

    items = lk.decode_chat_items(out["ran"].items)
    calls = [i for i in items if isinstance(i, FunctionCall)]
    outputs = [i for i in items if isinstance(i, FunctionCallOutput)]
    assert calls and calls[0].name == "get_weather" and calls[0].call_id == "lk_c1"
    assert outputs and outputs[0].output == "sunny in Paris"
    assert any(getattr(i, "role", None) == "assistant"
               and i.content == ["It is sunny in Paris."] for i in items)

    history = lk.decode_chat_items(out["history"].items)
    assert any(getattr(i, "role", None) == "user" and i.content == ["weather in Paris?"]
               for i in history)
    assert out["info"].instructions == "You are LiveKit's weather agent."
    assert list(out["info"].tools) == ["get_weather"]
    assert out["state"].agent_id == out["info"].id
    assert "max_tool_steps" in out["state"].options
    assert out["framework"].sdk == "python" and out["framework"].sdk_version
    assert not out["fin"].HasField("user_verdict")
    added = {ev.conversation_item_added.item.WhichOneof("item") for ev in events}
    assert "message" in added
