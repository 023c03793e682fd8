"""Remote sessions on LiveKit's own protocol (``livekit.protocol.agent_pb.agent_session``).

``SessionHost`` serves an agents_trio session to LiveKit's ``RemoteSession`` over TCP (4-byte
big-endian length + protobuf, as ``TcpSessionTransport`` frames it) and, with
:func:`serve_room`, over the room's ``lk.agent.session`` byte streams; ``RemoteSession`` is the
Trio client of the same protocol, with LiveKit's method names, able to drive LiveKit's own
``SessionHost`` over either transport. The wire format is in :mod:`.codec`, the chat-item and event mapping in
:mod:`.convert`.
"""

from .client import (RemoteSession, accept_remote_session, connect_remote_session,
                     open_remote_session)
from .convert import decode_chat_item, decode_chat_items, encode_chat_item, encode_event
from .host import LkHostStatistics, SessionHost, open_session_host
from .room import (TOPIC_SESSION_MESSAGES, RoomLink, host_session_on_room,
                   open_room_remote_session, serve_room)

__all__ = ["TOPIC_SESSION_MESSAGES", "LkHostStatistics", "RemoteSession", "RoomLink",
           "SessionHost", "accept_remote_session", "connect_remote_session", "decode_chat_item",
           "decode_chat_items", "encode_chat_item", "encode_event", "host_session_on_room",
           "open_remote_session", "open_room_remote_session", "open_session_host",
           "serve_room"]
