"""Connecting to a room: clear errors for bad input, never a hang or a leaked asyncio task.

The server side is faked with plain TCP listeners on localhost (the SDK's real signalling
client talks to them), so these run on the wall clock, bounded by short timeouts.
"""

from __future__ import annotations

import base64
import json

import pytest
import trio

from agents_trio import open_bridge
from agents_trio.io.room import RoomConnectError, mint_token, open_room


async def test_a_malformed_url_fails_before_any_network() -> None:
    async with open_bridge() as bridge:
        for url in ("", "livekit.example.com", "ftp://host", "wss://"):
            with pytest.raises(RoomConnectError, match="invalid LiveKit URL"):
                async with open_room(url, "token"):
                    pass
        with pytest.raises(RoomConnectError, match="no access token"):
            async with open_room("wss://example.com", ""):
                pass
        assert bridge.statistics().calls == 0


async def _closed_port() -> int:
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


async def test_an_unreachable_server_gives_a_clear_error() -> None:
    port = await _closed_port()
    with trio.fail_after(10):
        async with open_bridge() as bridge:
            with pytest.raises(RoomConnectError, match="unreachable"):
                async with open_room(f"ws://127.0.0.1:{port}", "token"):
                    pass
            assert bridge.statistics().asyncio_tasks == 0


async def _serve_http(status: bytes, body: bytes, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Answer every HTTP request with ``status`` (what a LiveKit server does on a bad token)."""

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            try:
                await stream.receive_some(65536)
                await stream.send_all(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\n"
                                      b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                                      % len(body) + body)
            except trio.BrokenResourceError:
                pass

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def test_a_rejected_token_gives_a_clear_error() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(_serve_http, b"401 Unauthorized",
                                       b"invalid token: token is expired")
            async with open_bridge() as bridge:
                with pytest.raises(RoomConnectError, match="rejected the token") as info:
                    async with open_room(f"ws://127.0.0.1:{port}", "not-a-valid-token"):
                        pass
                assert "token is expired" in str(info.value)
                assert bridge.statistics().asyncio_tasks == 0
            nursery.cancel_scope.cancel()


async def test_a_silent_server_times_out_without_a_leaked_task() -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            nursery.start_soon(trio.serve_listeners, silent, listeners)
            async with open_bridge() as bridge:
                t0 = trio.current_time()
                with pytest.raises(RoomConnectError, match="timed out"):
                    async with open_room(f"ws://127.0.0.1:{port}", "token",
                                         connect_timeout=0.3):
                        pass
                assert trio.current_time() - t0 < 2.5
                assert bridge.statistics().asyncio_tasks == 0
            nursery.cancel_scope.cancel()


def _claims(jwt: str) -> dict:
    payload = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def test_mint_token_grants_what_the_agent_needs() -> None:
    pytest.importorskip("livekit.api", reason="minting tokens needs livekit-api")
    claims = _claims(mint_token("APIkey", "s" * 32, room="support", identity="agent-1",
                                name="Agent"))
    assert claims["sub"] == "agent-1" and claims["iss"] == "APIkey"
    assert claims["video"]["roomJoin"] is True and claims["video"]["room"] == "support"
    assert claims["video"]["canUpdateOwnMetadata"] is True
    assert claims["kind"] == "agent" and claims["name"] == "Agent"
    with pytest.raises(RoomConnectError, match="API key and secret"):
        mint_token("", "", room="r", identity="i")
