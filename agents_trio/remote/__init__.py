"""Remote sessions: drive a running agent from another process over the wire protocol.

``SessionHost`` serves a session (TCP or a Unix socket); ``RemoteSession`` is its client;
``simulate`` runs scenario files against an agent, remotely or in-process. The wire format is
in ``agents_trio.remote.wire`` (its payloads in ``remote.wire_payloads``). This package sits
above the session (it serves one); nothing below it imports it.
"""

from .client import (
                     ChatHistoryPage,
                     RemoteSession,
                     RemoteSessionStatistics,
                     connect_remote_session,
                     connect_stream,
                     open_remote_session,
                     parse_address,
)
from .errors import RemoteConnectionError, RemoteSessionClosedError, RemoteSessionError
from .host import SessionHost, SessionHostStatistics, open_session_host, serve_session

__all__ = [
    "ChatHistoryPage", "RemoteConnectionError", "RemoteSession", "RemoteSessionClosedError",
    "RemoteSessionError", "RemoteSessionStatistics", "SessionHost", "SessionHostStatistics",
    "connect_remote_session", "connect_stream", "open_remote_session", "open_session_host",
    "parse_address", "serve_session",
]
