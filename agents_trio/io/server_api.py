"""LiveKit's server API (``livekit.api.LiveKitAPI``, Twirp over HTTP) called from Trio.

    async with open_server_api(url) as server:
        await server.create_sip_participant(sip_call_to="+15105550123", ...)
        await server.move_participant(room="a", identity="b", destination_room="c")
        await server.delete_room("a")

The client is livekit-api's asyncio one: it is created, used and closed on the asyncio
bridge, so its HTTP session lives on the bridge's loop. The request messages are built here
from plain keywords, so the rest of the package does not import ``livekit.api``.

Needs ``livekit-api`` (the ``livekit-plugins`` extra).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlparse, urlunparse

import trio

from .bridge import AsyncioBridge, current_bridge

__all__ = ["BridgedLiveKitAPI", "ServerAPI", "http_url", "open_server_api"]

logger = logging.getLogger("agents_trio.server_api")

_CLOSE_GRACE = 2.0


def http_url(url: str) -> str:
    """The server's HTTP address for a ``ws[s]://`` (or ``http[s]://``) LiveKit URL."""
    parsed = urlparse(url)
    scheme = {"ws": "http", "wss": "https"}.get(parsed.scheme, parsed.scheme)
    if scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"invalid LiveKit URL {url!r}: expected ws[s]:// or http[s]://host")
    return urlunparse(parsed._replace(scheme=scheme))


class ServerAPI:
    """The server calls the runtime makes (the warm transfer, the job context's room and SIP
    calls), each one Twirp request on the bridge.

    Errors are livekit-api's (``livekit.api.TwirpError`` for an answer other than 200).
    """

    def __init__(self, bridge: AsyncioBridge, client: Any) -> None:  # noqa: ANN401
        self._bridge = bridge
        self._client = client

    async def create_sip_participant(self, *, sip_call_to: str, room_name: str,
                                     participant_identity: str,
                                     participant_name: str | None = None,
                                     sip_trunk_id: str | None = None,
                                     sip_number: str | None = None,
                                     headers: dict[str, str] | None = None, dtmf: str = "",
                                     wait_until_answered: bool = False,
                                     ringing_timeout: float | None = None,
                                     trunk: Any = None) -> Any:  # noqa: ANN401
        """Dial ``sip_call_to`` into ``room_name`` (``CreateSIPParticipant``); with
        ``wait_until_answered``, returns once the callee answered. ``trunk`` is a
        ``livekit.api.SIPOutboundConfig`` dialing without a saved trunk.

        Returns: the ``SIPParticipantInfo``.

        Cancellation: cancels the HTTP request (the server may still place the call).
        """
        from livekit import api

        request = api.CreateSIPParticipantRequest(
            sip_trunk_id=sip_trunk_id, sip_call_to=sip_call_to, room_name=room_name,
            participant_identity=participant_identity, participant_name=participant_name,
            wait_until_answered=wait_until_answered,
            sip_number=sip_number, headers=headers or {}, dtmf=dtmf)
        if ringing_timeout is not None:
            request.ringing_timeout.FromNanoseconds(int(ringing_timeout * 1e9))
        if trunk is not None:
            request.trunk.CopyFrom(trunk)
        return await self._bridge.run(self._client.sip.create_sip_participant, request)

    async def transfer_sip_participant(self, *, room_name: str, participant_identity: str,
                                       transfer_to: str, play_dialtone: bool = False) -> Any:  # noqa: ANN401
        """Transfer a SIP participant's call to ``transfer_to`` (``TransferSIPParticipant``:
        a cold transfer; the caller leaves the room).

        Cancellation: cancels the HTTP request (the server may still transfer them).
        """
        from livekit import api

        return await self._bridge.run(
            self._client.sip.transfer_sip_participant, api.TransferSIPParticipantRequest(
                room_name=room_name, participant_identity=participant_identity,
                transfer_to=transfer_to, play_dialtone=play_dialtone))

    async def move_participant(self, *, room: str, identity: str, destination_room: str
                               ) -> None:
        """Move ``identity`` from ``room`` to ``destination_room`` (``MoveParticipant``).

        Cancellation: cancels the HTTP request (the server may still move them).
        """
        from livekit import api

        await self._bridge.run(self._client.room.move_participant, api.MoveParticipantRequest(
            room=room, identity=identity, destination_room=destination_room))

    async def call(self, service: str, method: str, *args: object, **kwargs: object
                   ) -> Any:  # noqa: ANN401 - livekit-api's reply
        """Any call of livekit-api's client: ``await client.<service>.<method>(*args, ...)``.

        Cancellation: cancels the HTTP request (the server may still act on it).
        """
        bound = getattr(getattr(self._client, service), method)
        return await self._bridge.run(bound, *args, **kwargs)

    async def delete_room(self, room: str) -> None:
        """Delete ``room``, disconnecting everyone in it (``DeleteRoom``).

        Cancellation: cancels the HTTP request (the server may still delete it).
        """
        from livekit import api

        await self._bridge.run(self._client.room.delete_room, api.DeleteRoomRequest(room=room))


#: the services of livekit-api's ``LiveKitAPI`` (its properties)
_SERVICES = ("room", "ingress", "egress", "sip", "agent_dispatch", "connector")


class BridgedLiveKitAPI:
    """livekit-api's ``LiveKitAPI`` called from Trio, as LiveKit's ``JobContext.api``:
    ``await ctx.api.room.delete_room(api.DeleteRoomRequest(room=...))``. Each call opens a
    client on the bridge (key and secret from ``LIVEKIT_API_KEY``/``LIVEKIT_API_SECRET``, as
    there), sends the request, closes the client and returns livekit-api's reply.

    Cancellation: a call's cancellation cancels its HTTP request (the server may still act).
    """

    def __init__(self, url: str, bridge: AsyncioBridge) -> None:
        self._url = url
        self._bridge = bridge

    def __getattr__(self, name: str) -> _BridgedService:
        if name not in _SERVICES:
            raise AttributeError(f"LiveKitAPI has no service {name!r}")
        return _BridgedService(self, name)

    async def aclose(self) -> None:
        """Nothing to close: each call closes its own client (LiveKit's ``aclose()``).

        Cancellation: a checkpoint only.
        """
        await trio.lowlevel.checkpoint()

    async def call_service(self, service: str, method: str, *args: object,
                           **kwargs: object) -> Any:  # noqa: ANN401 - livekit-api's reply
        """``await LiveKitAPI().<service>.<method>(*args, **kwargs)`` with a client of its own.

        Cancellation: cancels the HTTP request (the server may still act on it).
        """
        async with open_server_api(self._url, bridge=self._bridge) as server:
            return await server.call(service, method, *args, **kwargs)


class _BridgedService:
    def __init__(self, owner: BridgedLiveKitAPI, name: str) -> None:
        self._owner = owner
        self._name = name

    def __getattr__(self, method: str) -> Any:  # noqa: ANN401
        import typing

        from livekit import api

        service_type = typing.get_type_hints(getattr(api.LiveKitAPI, self._name).fget)["return"]
        if method.startswith("_") or not callable(getattr(service_type, method, None)):
            raise AttributeError(f"LiveKitAPI.{self._name} has no method {method!r}")

        async def call(*args: object, **kwargs: object) -> Any:  # noqa: ANN401
            return await self._owner.call_service(self._name, method, *args, **kwargs)

        call.__name__ = method
        return call


@asynccontextmanager
async def open_server_api(url: str, api_key: str | None = None, api_secret: str | None = None,
                          *, bridge: AsyncioBridge | None = None) -> AsyncIterator[ServerAPI]:
    """A server API client for the block (key and secret default to ``LIVEKIT_API_KEY`` and
    ``LIVEKIT_API_SECRET``, as in livekit-api).

    Raises:
        ValueError: ``url`` is not a LiveKit URL, or no key and secret are known.

    Cancellation: leaving the block, cancelled or not, closes the client's HTTP session
    (shielded, at most 2 s).
    """
    from livekit import api

    address = http_url(url)
    bridge = bridge or current_bridge()
    client = await bridge.run_sync(api.LiveKitAPI, address, api_key, api_secret)
    try:
        yield ServerAPI(bridge, client)
    finally:
        with trio.move_on_after(_CLOSE_GRACE, shield=True):
            if not bridge.closed:
                try:
                    await bridge.run(client.aclose)
                except Exception:
                    logger.warning("closing the server API client failed", exc_info=True)
