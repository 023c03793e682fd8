"""Remote sessions on LiveKit's own protocol (``livekit.protocol.agent_pb.agent_session``).

``SessionHost`` serves an agents_trio session to LiveKit's ``RemoteSession`` (TCP, 4-byte
big-endian length + protobuf, as ``TcpSessionTransport`` frames it); ``RemoteSession`` is the
Trio client of the same protocol, with LiveKit's method names, able to drive LiveKit's own
``SessionHost``. The wire format is in :mod:`.codec`, the chat-item and event mapping in
:mod:`.convert`.
"""

from .host import LkHostStatistics, SessionHost, open_session_host

__all__ = ["LkHostStatistics", "SessionHost", "open_session_host"]
