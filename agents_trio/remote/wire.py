"""The remote-session wire protocol: msgspec Structs, msgpack-encoded, length-prefixed.

A frame is a 4-byte big-endian payload length followed by one msgpack-encoded message. Every
message is a :class:`Message`: a tagged union on the ``kind`` field, with a protocol version
``v``. Requests carry an ``id`` chosen by the client; the host echoes it in exactly one reply
(``Cancel`` gets none). Events of a subscription arrive as :class:`Event` frames, and a host
that is going away says why in a :class:`Goodbye` before it closes the connection.

This module is sans-IO except for :class:`FrameReader`, which reads frames from any
``trio.abc.ReceiveStream``. Decoding raises :class:`WireError` subclasses with a ``code``
(see :data:`ErrorCode`) and, when the frame was readable that far, the ``request_id``, so
that a host can answer the offending request with a clear error and keep the connection.
"""

from __future__ import annotations

import struct
from typing import Annotated, Any, Generic, Literal, TypeVar, get_args

import msgspec
import trio

from .._errors import AgentsTrioError
from .wire_payloads import (AgentConfigUpdateItem, AgentHandoffItem, AgentInfo, FunctionCallItem,
                            FunctionCallOutputItem, MessageItem, SessionStateInfo, SpeechInfo,
                            ToolInfo, WireEvent, WireItem, event_to_wire, from_wire_item,
                            to_wire_item)

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE", "HEADER_SIZE", "PROTOCOL_VERSION", "AgentConfigUpdateItem",
    "AgentHandoffItem", "AgentInfo", "AgentInfoReply", "Cancel", "ErrorCode", "ErrorReply", "Event",
    "FrameDecoder", "FrameReader", "FrameTooLargeError", "FunctionCallItem",
    "FunctionCallOutputItem", "GetAgentInfo", "GetChatHistory", "GetSessionState", "Goodbye",
    "HistoryReply", "MalformedMessageError", "Message", "MessageItem", "ProtocolVersionError",
    "ReadyReply", "Reply", "ReplyMessage", "Request", "RequestMessage", "Run", "RunReply",
    "SessionStateInfo", "SessionStateReply", "SpeechInfo", "Subscribe", "SubscribedReply",
    "ToolInfo", "TruncatedFrameError", "UnknownMessageTypeError", "Unsubscribe",
    "UnsubscribedReply", "WaitForReady", "WireError", "WireEvent", "WireItem", "decode_reply",
    "decode_request", "encode_frame", "event_to_wire", "from_wire_item", "to_wire_item",
]

PROTOCOL_VERSION = 1
DEFAULT_MAX_FRAME_SIZE = 1 << 20
"""Largest payload (bytes) either side accepts by default: 1 MiB."""

_HEADER = struct.Struct(">I")
HEADER_SIZE = _HEADER.size

ErrorCode = Literal[
    "malformed_message", "frame_too_large", "truncated_frame", "unknown_message_type",
    "unsupported_version", "bad_request", "duplicate_request_id", "too_many_requests",
    "too_many_connections", "not_ready", "run_failed", "session_closed", "host_closing",
    "response_too_large", "internal_error", "read_timeout", "idle_timeout",
]


# --------------------------------------------------------------------------------------------
# Errors


class WireError(AgentsTrioError):
    """A frame or message that breaks the protocol.

    Attributes:
        code: The :data:`ErrorCode` a host answers with.
        request_id: The id of the offending request, when the frame was readable that far.
    """

    code: str = "malformed_message"

    def __init__(self, message: str, *, request_id: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id


class FrameTooLargeError(WireError):
    """A frame header announced more bytes than the receiver accepts."""

    code = "frame_too_large"


class TruncatedFrameError(WireError):
    """The stream ended in the middle of a frame."""

    code = "truncated_frame"


class MalformedMessageError(WireError):
    """A complete frame whose payload is not a valid message."""

    code = "malformed_message"


class UnknownMessageTypeError(WireError):
    """A well-formed message of a kind the receiver does not handle."""

    code = "unknown_message_type"


class ProtocolVersionError(WireError):
    """A message of another protocol version."""

    code = "unsupported_version"


# --------------------------------------------------------------------------------------------
# Messages


class Message(msgspec.Struct, tag_field="kind", kw_only=True):
    """Base of every frame's message; ``kind`` (the tag) names it, ``v`` is the version."""

    v: int = PROTOCOL_VERSION

    @property
    def kind(self) -> str:
        return self.__struct_config__.tag  # type: ignore[return-value]


class Request(Message, kw_only=True):
    """A request of a client; the host echoes ``id`` in its reply."""

    id: int


class WaitForReady(Request, tag="wait_for_ready", kw_only=True):
    """Answered with :class:`ReadyReply` once the session runs its first agent."""


class Run(Request, tag="run", kw_only=True):
    """Send ``text`` as a user turn; answered with :class:`RunReply` once the turn settled."""

    text: str


_Index = Annotated[int, msgspec.Meta(ge=0)]


class GetChatHistory(Request, tag="get_chat_history", kw_only=True):
    """Answered with :class:`HistoryReply`: a page of the session's chat history.

    Attributes:
        start: Index of the first item wanted (0 is the oldest). None (the default): the most
            recent items that fit in one reply.
        limit: At most this many items (None: as many as fit in one reply).
    """

    start: _Index | None = None
    limit: _Index | None = None


class GetAgentInfo(Request, tag="get_agent_info", kw_only=True):
    """Answered with :class:`AgentInfoReply`: the current agent."""


class GetSessionState(Request, tag="get_session_state", kw_only=True):
    """Answered with :class:`SessionStateReply`."""


class Subscribe(Request, tag="subscribe", kw_only=True):
    """Stream session events on this connection; ``events`` filters by name (None: all)."""

    events: list[str] | None = None


class Unsubscribe(Request, tag="unsubscribe", kw_only=True):
    """Stop streaming events on this connection."""


class Cancel(Request, tag="cancel", kw_only=True):
    """The client gave up on request ``id``: the host drops it and sends no reply."""


RequestMessage = (WaitForReady | Run | GetChatHistory | GetAgentInfo | GetSessionState | Subscribe |
                  Unsubscribe | Cancel)


class Reply(Message, kw_only=True):
    """A successful answer to request ``id``."""

    id: int


class ReadyReply(Reply, tag="ready", kw_only=True):
    agent_id: str


class RunReply(Reply, tag="run_reply", kw_only=True):
    """The items the turn produced: assistant messages, tool calls and outputs, handoffs.

    A turn that legitimately says nothing has no items; that is a success, not an error."""

    items: list[WireItem] = msgspec.field(default_factory=list)


class HistoryReply(Reply, tag="history", kw_only=True):
    """The history items of indices ``start`` to ``end`` (exclusive) of ``total``.

    A reply always fits the frame limit: it holds fewer items than asked when they do not fit,
    and an item that alone does not fit is sent with its text shortened (its id is then in
    ``truncated``). ``more``: items after ``end`` exist; ``start > 0``: items before it do.
    A host of before paging sends only ``items`` (``end`` and ``total`` are then None).
    """

    items: list[WireItem] = msgspec.field(default_factory=list)
    start: int = 0
    end: int | None = None
    total: int | None = None
    more: bool = False
    truncated: list[str] = msgspec.field(default_factory=list)


class AgentInfoReply(Reply, tag="agent_info", kw_only=True):
    agent: AgentInfo


class SessionStateReply(Reply, tag="session_state", kw_only=True):
    state: SessionStateInfo


class SubscribedReply(Reply, tag="subscribed", kw_only=True):
    events: list[str] | None = None


class UnsubscribedReply(Reply, tag="unsubscribed", kw_only=True):
    pass


class ErrorReply(Message, tag="error", kw_only=True):
    """Request ``id`` failed (``id`` is None when the frame was too broken to tell)."""

    id: int | None = None
    code: str
    message: str
    error_type: str | None = None


class Event(Message, tag="event", kw_only=True):
    """A session event of a subscription (see :data:`WireEvent`)."""

    event: WireEvent


class Goodbye(Message, tag="goodbye", kw_only=True):
    """The host is closing this connection, for the reason given."""

    code: str
    message: str


ReplyMessage = (ReadyReply | RunReply | HistoryReply | AgentInfoReply | SessionStateReply |
                SubscribedReply | UnsubscribedReply | ErrorReply | Event | Goodbye)


# --------------------------------------------------------------------------------------------
# Encoding and decoding

_encoder = msgspec.msgpack.Encoder()


def encode_frame(message: Message) -> bytes:
    """One frame: the length header and the msgpack payload of ``message``."""
    payload = _encoder.encode(message)
    return _HEADER.pack(len(payload)) + payload


class _Envelope(msgspec.Struct):
    """The fields every message has, loosely typed: used to explain a failed decode."""

    v: Any = None
    kind: Any = None
    id: Any = None


_envelope_decoder = msgspec.msgpack.Decoder(_Envelope)

_M = TypeVar("_M", bound=Message)


class _MessageDecoder(Generic[_M]):
    def __init__(self, union: object, what: str) -> None:
        self._decoder = msgspec.msgpack.Decoder(union)
        self._kinds = frozenset(t.__struct_config__.tag for t in get_args(union))
        self._what = what

    def decode(self, payload: bytes) -> _M:
        try:
            message: _M = self._decoder.decode(payload)
        except msgspec.DecodeError as e:
            raise self._explain(payload, e) from None
        if message.v != PROTOCOL_VERSION:
            raise ProtocolVersionError(_version_text(message.v),
                                       request_id=getattr(message, "id", None))
        return message

    def _explain(self, payload: bytes, error: msgspec.DecodeError) -> WireError:
        try:
            env = _envelope_decoder.decode(payload)
        except msgspec.DecodeError:
            return MalformedMessageError(f"malformed message: {error}")
        rid = env.id if type(env.id) is int else None
        if env.v is not None and env.v != PROTOCOL_VERSION:
            return ProtocolVersionError(_version_text(env.v), request_id=rid)
        if isinstance(env.kind, str) and env.kind not in self._kinds:
            return UnknownMessageTypeError(
                f"unknown message type {env.kind[:64]!r} (not a {self._what})", request_id=rid)
        return MalformedMessageError(f"malformed message: {error}", request_id=rid)


def _version_text(v: object) -> str:
    shown = repr(v)[:32]
    return f"unsupported protocol version {shown} (this side speaks {PROTOCOL_VERSION})"


_request_decoder: _MessageDecoder[Any] = _MessageDecoder(RequestMessage, "request")
_reply_decoder: _MessageDecoder[Any] = _MessageDecoder(ReplyMessage, "reply or event")


def decode_request(payload: bytes) -> RequestMessage:
    """Decode a request payload (without its header).

    Raises:
        WireError: ``MalformedMessageError``, ``UnknownMessageTypeError`` or
            ``ProtocolVersionError``, with ``request_id`` when it could be read.
    """
    return _request_decoder.decode(payload)  # type: ignore[no-any-return]


def decode_reply(payload: bytes) -> ReplyMessage:
    """Decode a reply, event or goodbye payload (without its header); raises like
    :func:`decode_request`."""
    return _reply_decoder.decode(payload)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# Framing


class FrameDecoder:
    """Splits a byte stream into frame payloads (sans-IO).

    Args:
        max_frame_size: The largest payload accepted; a header announcing more raises
            :class:`FrameTooLargeError` before any of the payload is buffered.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._start = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes | bytearray) -> None:
        if self._start and self._start * 2 >= len(self._buffer):
            del self._buffer[:self._start]
            self._start = 0
        self._buffer += data

    def expected(self) -> int | None:
        """The size of the frame being received (header included), once its header is in."""
        if self.buffered < HEADER_SIZE:
            return None
        (size,) = _HEADER.unpack_from(self._buffer, self._start)
        return HEADER_SIZE + int(size)

    def end_of_stream(self) -> TruncatedFrameError | None:
        """The error of a stream that ends now: None between frames, else a
        :class:`TruncatedFrameError` saying how much of the frame came."""
        if not self.buffered:
            return None
        total = self.expected()
        want = f"of {total} " if total is not None else ""
        return TruncatedFrameError(
            f"the stream ended in the middle of a frame ({self.buffered} bytes {want}received)")

    def next_frame(self) -> bytes | None:
        """The next complete payload, or None until more bytes arrive.

        Raises:
            FrameTooLargeError: the next frame is over the limit (the decoder is then
                unusable: the stream cannot be resynchronized without reading it).
        """
        total = self.expected()
        if total is None:
            return None
        if total - HEADER_SIZE > self.max_frame_size:
            raise FrameTooLargeError(f"frame of {total - HEADER_SIZE} bytes exceeds the limit "
                                     f"of {self.max_frame_size} bytes")
        if self.buffered < total:
            return None
        begin = self._start + HEADER_SIZE
        self._start += total
        return bytes(self._buffer[begin:self._start])


class FrameReader:
    """Reads frame payloads from a stream.

    Args:
        stream: Any ``trio.abc.ReceiveStream``.
        max_frame_size: See :class:`FrameDecoder`.
    """

    def __init__(self, stream: trio.abc.ReceiveStream, *,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._stream = stream
        self._decoder = FrameDecoder(max_frame_size)

    async def receive(self) -> bytes | None:
        """The next payload, or None when the stream ended cleanly between frames.

        Raises:
            FrameTooLargeError, TruncatedFrameError: see their descriptions.
            trio.BrokenResourceError: the stream broke.

        Cancellation: a checkpoint; a cancelled call loses no bytes (they stay buffered).
        """
        while (payload := self._decoder.next_frame()) is None:
            data = await self._stream.receive_some(65536)
            if not data:
                error = self._decoder.end_of_stream()
                if error is not None:
                    raise error
                return None
            self._decoder.feed(data)
        return payload
