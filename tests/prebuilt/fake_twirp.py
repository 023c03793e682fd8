"""A fake LiveKit server API: a Twirp endpoint over real HTTP on 127.0.0.1, in the test's Trio
run, recording each call (service method and decoded request) and answering as scripted.

livekit-api's client (aiohttp on the asyncio bridge) talks to it exactly as to a LiveKit
server: ``POST /twirp/livekit.<Service>/<Method>`` with a protobuf body and a bearer token.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio
from livekit import api
from livekit.protocol import room as room_pb
from livekit.protocol import sip as sip_pb

#: request and response types of the methods the runtime calls (the warm transfer, the job
#: context's room and SIP calls)
METHODS: dict[str, tuple[Any, Any]] = {
    "livekit.SIP/CreateSIPParticipant": (sip_pb.CreateSIPParticipantRequest,
                                         sip_pb.SIPParticipantInfo),
    "livekit.RoomService/MoveParticipant": (room_pb.MoveParticipantRequest,
                                            room_pb.MoveParticipantResponse),
    "livekit.RoomService/DeleteRoom": (room_pb.DeleteRoomRequest, room_pb.DeleteRoomResponse),
    "livekit.SIP/TransferSIPParticipant": (sip_pb.TransferSIPParticipantRequest,
                                           sip_pb.SIPParticipantInfo),
}


class TwirpFailure(Exception):
    """Raised by a handler: answered as a Twirp error (HTTP ``status``, JSON body)."""

    def __init__(self, status: int, code: str, msg: str) -> None:
        super().__init__(msg)
        self.status, self.code, self.msg = status, code, msg


Handler = Callable[[Any], Awaitable[Any]]


@dataclass
class Call:
    method: str  # "CreateSIPParticipant"
    request: Any
    token: str


@dataclass
class FakeTwirpServer:
    """``handlers`` by method name may answer differently (default: an empty response);
    ``calls`` records every request in arrival order."""

    handlers: dict[str, Handler] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    port: int = 0
    changed: trio.Event = field(default_factory=trio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def methods(self) -> list[str]:
        return [c.method for c in self.calls]

    async def wait_for_calls(self, n: int) -> None:
        """Wait until ``n`` calls arrived (a witness; no polling).

        Cancellation: a checkpoint only."""
        await trio.lowlevel.checkpoint()
        while len(self.calls) < n:
            await self.changed.wait()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._serve_connection, listeners)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        buffer = b""
        async with stream:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {k.strip().lower(): v.strip()
                           for k, v in (line.split(":", 1) for line in lines[1:])}
                length = int(headers.get("content-length", "0"))
                while len(buffer) < length:
                    buffer += await stream.receive_some(65536)
                body, buffer = buffer[:length], buffer[length:]
                status, payload, kind = await self._answer(path, headers, body)
                await stream.send_all(
                    f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)

    async def _answer(self, path: str, headers: dict[str, str], body: bytes
                      ) -> tuple[int, bytes, str]:
        name = path.removeprefix("/twirp/")
        if name not in METHODS:
            return 404, json.dumps({"code": "bad_route", "msg": name}).encode(), \
                "application/json"
        request_type, response_type = METHODS[name]
        method = name.split("/")[1]
        request = request_type.FromString(body)
        self.calls.append(Call(method, request,
                               headers.get("authorization", "").removeprefix("Bearer ")))
        self.changed.set()
        self.changed = trio.Event()
        handler = self.handlers.get(method)
        try:
            response = await handler(request) if handler else response_type()
        except TwirpFailure as e:
            return e.status, json.dumps({"code": e.code, "msg": e.msg}).encode(), \
                "application/json"
        return 200, response.SerializeToString(), "application/protobuf"


def token_room(token: str, key: str, secret: str) -> str:
    """The room a minted access token grants (checking its signature)."""
    return str(api.TokenVerifier(key, secret).verify(token).video.room)
