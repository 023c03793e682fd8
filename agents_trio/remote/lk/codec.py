"""LiveKit's remote-session wire format: ``AgentSessionMessage`` protobufs in length-prefixed
frames (a 4-byte big-endian payload length, then the serialized message), as LiveKit's
``TcpSessionTransport`` and its console speak them.

The framing is the one of ``remote.wire`` (shared :class:`FrameDecoder`); what differs is the
payload. Decoding raises :class:`LkWireError` subclasses; a frame that parses as protobuf but
says nothing the receiver can act on (no message set, a request without an id or of a kind
it does not know) is the caller's to judge: see :func:`request_problem`.
"""

from __future__ import annotations

import struct

import trio
from google.protobuf.message import DecodeError
from livekit.protocol.agent_pb import agent_session as pb

from ..wire import (DEFAULT_MAX_FRAME_SIZE, FrameDecoder, FrameTooLargeError,
                    MalformedMessageError, TruncatedFrameError, WireError)

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE", "HEADER_SIZE", "KNOWN_REQUESTS", "LIVEKIT_MAX_FRAME_SIZE",
    "FrameDecoder", "FrameTooLargeError", "LkFrameReader", "MalformedMessageError",
    "TruncatedFrameError", "WireError", "decode_message", "encode_message", "pb",
    "request_problem",
]

_HEADER = struct.Struct(">I")
HEADER_SIZE = _HEADER.size

LIVEKIT_MAX_FRAME_SIZE = 1 << 20
"""The largest frame LiveKit's ``TcpSessionTransport`` reads: a peer that sends more is cut."""

KNOWN_REQUESTS = frozenset({
    "ping", "get_chat_history", "run_input", "get_agent_info", "get_session_state",
    "get_rtc_stats", "get_session_usage", "get_framework_info", "update_io",
    "finalize_simulation",
})
"""The ``SessionRequest`` kinds of livekit-protocol this package knows."""


def encode_message(message: pb.AgentSessionMessage) -> bytes:
    """One frame: the length header and the serialized message."""
    data: bytes = message.SerializeToString()
    return _HEADER.pack(len(data)) + data


def decode_message(payload: bytes) -> pb.AgentSessionMessage:
    """Parse one frame's payload.

    Raises:
        MalformedMessageError: the payload is not an ``AgentSessionMessage``.
    """
    message = pb.AgentSessionMessage()
    try:
        message.ParseFromString(payload)
    except (DecodeError, ValueError, RecursionError) as e:
        raise MalformedMessageError(f"not an AgentSessionMessage ({len(payload)} bytes): "
                                    f"{e}") from None
    return message


def request_problem(request: pb.SessionRequest) -> str | None:
    """Why ``request`` cannot be served as it stands (None: it can)."""
    if not request.request_id:
        return "the request has no request_id"
    kind = request.WhichOneof("request")
    if kind is None:
        return "the request names no known request type (unset or newer than this host)"
    if kind not in KNOWN_REQUESTS:  # pragma: no cover - a newer livekit-protocol
        return f"unhandled request type {kind!r}"
    return None


class LkFrameReader:
    """Reads ``AgentSessionMessage`` frames from a Trio stream (the clients' side; a host
    reads with its own deadlines).

    Args:
        max_frame_size: Larger frames raise :class:`FrameTooLargeError`.
    """

    def __init__(self, stream: trio.abc.ReceiveStream, *,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._stream = stream
        self._decoder = FrameDecoder(max_frame_size)

    async def receive(self) -> pb.AgentSessionMessage | None:
        """The next message, or None at a clean end of the stream.

        Raises:
            FrameTooLargeError, TruncatedFrameError, MalformedMessageError: a broken peer.

        Cancellation: safe; bytes already read stay buffered for the next call.
        """
        while True:
            payload = self._decoder.next_frame()
            if payload is not None:
                return decode_message(payload)
            data = await self._stream.receive_some(65536)
            if not data:
                error = self._decoder.end_of_stream()
                if error is not None:
                    raise error
                return None
            self._decoder.feed(bytes(data))
