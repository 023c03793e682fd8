"""Remote sessions: drive a running agent from another process.

Two protocols. LiveKit's own (``AgentSessionMessage`` protobufs, over TCP or a room's
``lk.agent.session`` byte streams) is in :mod:`agents_trio.remote.lk`: its ``SessionHost``
serves LiveKit's ``RemoteSession`` and console, its ``RemoteSession`` drives LiveKit's
``SessionHost``; the CLI speaks it by default. The home-made msgpack protocol (this package's
``SessionHost`` and ``RemoteSession``; the wire format in ``remote.wire``, its payloads in
``remote.wire_payloads``) stays for what LiveKit's cannot say: paged history, cancelling a
request, filtered subscriptions, typed errors, Unix sockets. ``simulate`` runs scenario files
over either, or in-process. This package sits above the session (it serves one); nothing below
it imports it.
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
