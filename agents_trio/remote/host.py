"""SessionHost: serves a running AgentSession to remote clients over TCP or a Unix socket.

Three ways to run one, by who owns it (trio-websocket style):

    host = await SessionHost(session, port=0).start()       # the session's nursery owns it
    async with open_session_host(session, port=0) as host:  # owns its own nursery
    host = await nursery.start(serve_session, session)      # the caller's nursery owns it

The host's tree: an event pump (``session.events()``, fanned out to subscribed clients, and
the readiness signal), one turn runner (the ``run`` requests of every client, one at a time,
in arrival order), the accept loop, and one task per connection. When the session closes,
``session.events()`` ends and the host stops: every pending request is answered with a
``session_closed`` error, every client gets a ``Goodbye``, and ``serve`` returns — so a host
owned by the session never keeps it open. There is no authentication: bind to loopback or a
Unix socket you control.

Hostile or broken clients cannot lock the host: each connection has a read deadline (a frame
must arrive whole within ``read_timeout``) and an idle deadline (``idle_timeout`` without a
request), and when every slot is taken a newcomer waits while the connections that went
longest without a request make room (see ``_slots.py``). Every reply fits the frame limit:
the chat history comes in pages (see ``_history.py``).
"""

from __future__ import annotations

import enum
import logging
import math
import os
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..nurseries import open_unwrapping_nursery
from .wire import (DEFAULT_MAX_FRAME_SIZE, ErrorReply, Event, Goodbye, encode_frame,
                   event_to_wire)
from .wire_payloads import FORWARDED_EVENTS
from ._connection import Connection, ConnectionLimits, Counters
from ._service import SessionService
from ._slots import Slots

if TYPE_CHECKING:
    from ..session import AgentSession

logger = logging.getLogger("agents_trio.remote")


@dataclass(frozen=True)
class SessionHostStatistics:
    """A snapshot of a host, for tests and monitoring.

    Attributes:
        connections: Connections open now.
        connections_total: Connections accepted since the host started.
        pending_requests: Requests waiting for a reply, over all connections.
        queued_turns: ``run`` requests waiting for (or in) the session.
        frames_received, replies_sent, errors_sent: Totals since the host started.
        events_dropped: Events not sent because a client's outbox was full.
        connections_overflowed: Connections closed because their client did not read.
        connections_waiting: Newcomers waiting for a connection slot now.
        connections_timed_out: Connections closed by their read or idle deadline.
        connections_evicted: Idle connections closed to make room for a newcomer.
    """

    connections: int
    connections_total: int
    pending_requests: int
    queued_turns: int
    frames_received: int
    replies_sent: int
    errors_sent: int
    events_dropped: int
    connections_overflowed: int
    connections_waiting: int
    connections_timed_out: int
    connections_evicted: int


class _HostState(enum.Enum):
    CREATED = "created"
    SERVING = "serving"
    STOPPING = "stopping"
    STOPPED = "stopped"


class SessionHost:
    """Serves ``session`` to RemoteSession clients.

    Args:
        session: The session to serve; it may be started before or after the host.
        host, port: TCP address to listen on (``port=0`` picks a free port).
        path: Listen on this Unix socket path instead of TCP (removed when the host stops).
        listeners: Serve these ``trio.abc.Listener``s instead (an empty list serves only the
            streams given to :meth:`serve_stream`).
        max_frame_size: Largest request (and reply) payload, in bytes (at least 512). A
            chat history longer than one reply is sent in pages.
        max_pending_requests: Slow requests (``run``, ``wait_for_ready``) one connection may
            have in flight; more are refused with ``too_many_requests``.
        max_connections: Connections served at once. A newcomer that finds them all taken
            waits for a slot (see ``idle_timeout_when_full``); at most ``max_connections``
            newcomers wait, more are refused with ``too_many_connections``.
        max_outbox: Frames queued for one client before it counts as not reading.
        close_grace: Seconds a stopping host gives each client to receive its goodbye.
        read_timeout: Seconds a client may take to send one frame, from its first byte to
            its last (a deadline for the whole frame, not between bytes: a client dripping a
            byte a second is cut too). A slower frame closes the connection with a
            ``read_timeout`` goodbye.
        idle_timeout: Seconds a connection may go without a request (counted from its last
            request, or the answer to it); then it is closed with an ``idle_timeout``
            goodbye. None: never. Subscribed connections and those with a request in flight
            are never idle: a listener is quiet by nature, and a client waiting for a turn
            waits for the host.
        idle_timeout_when_full: While newcomers wait for a slot, the connections that went
            longest without a request give theirs up — one per newcomer, each once it has
            been idle this many seconds (closed with an ``idle_timeout`` goodbye that says the
            host is full). Subscribed and busy connections keep their slots.
        admission_timeout: Seconds a newcomer waits for a slot before it is refused with
            ``too_many_connections``.

    Raises:
        ValueError: an option out of range.

    Note:
        There are no per-peer limits: the host is meant for loopback and Unix sockets, where
        every client is the same peer, so such a limit would only restate ``max_connections``.
        Making room for newcomers is what defends against slow clients there.
    """

    def __init__(self, session: AgentSession, *, host: str = "127.0.0.1", port: int = 0,
                 path: str | os.PathLike[str] | None = None,
                 listeners: list[trio.abc.Listener[Any]] | None = None,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, max_pending_requests: int = 32,
                 max_connections: int = 32, max_outbox: int = 256,
                 close_grace: float = 1.0, read_timeout: float = 10.0,
                 idle_timeout: float | None = 3600.0, idle_timeout_when_full: float = 1.0,
                 admission_timeout: float = 5.0) -> None:
        _check_options(max_frame_size=max_frame_size, max_connections=max_connections,
                       read_timeout=read_timeout, idle_timeout=idle_timeout,
                       idle_timeout_when_full=idle_timeout_when_full,
                       admission_timeout=admission_timeout)
        self._session = session
        self._bind = (host, port)
        self._path = os.fspath(path) if path is not None else None
        self._given_listeners = listeners
        self._listeners: list[trio.abc.Listener[Any]] = []
        self._limits = ConnectionLimits(max_frame_size=max_frame_size,
                                        max_pending_requests=max_pending_requests,
                                        max_outbox=max_outbox, close_grace=close_grace,
                                        read_timeout=read_timeout, idle_timeout=idle_timeout)
        self._max_connections = max_connections
        self._slots = Slots(max_connections, idle_when_full=idle_timeout_when_full,
                            wait_timeout=admission_timeout)
        self._close_grace = close_grace
        self._counters = Counters()
        self._state = _HostState.CREATED
        self._connections: set[Connection] = set()
        self._connections_changed = trio.lowlevel.ParkingLot()
        self._stop_requested = trio.Event()
        self._stop_reason = ("host_closing", "the host is closing")
        self._stopped = trio.Event()
        self._service = SessionService(session, max_frame_size=max_frame_size)
        self._address: str | None = None
        self._port: int | None = None

    # -- public -------------------------------------------------------------------------------
    @property
    def address(self) -> str:
        """Where clients connect: ``"HOST:PORT"`` or ``"unix:PATH"`` (once serving)."""
        if self._address is None:
            raise RuntimeError("the host is not serving yet")
        return self._address

    @property
    def port(self) -> int | None:
        """The TCP port (useful with ``port=0``), or None for a Unix socket."""
        return self._port

    def statistics(self) -> SessionHostStatistics:
        c = self._counters
        return SessionHostStatistics(
            connections=len(self._connections), connections_total=c.connections_total,
            pending_requests=sum(conn.pending_requests for conn in self._connections),
            queued_turns=self._service.queued_turns, frames_received=c.frames_received,
            replies_sent=c.replies_sent, errors_sent=c.errors_sent,
            events_dropped=c.events_dropped, connections_overflowed=c.connections_overflowed,
            connections_waiting=self._slots.waiting,
            connections_timed_out=c.connections_timed_out,
            connections_evicted=c.connections_evicted)

    async def start(self, nursery: trio.Nursery | None = None) -> SessionHost:
        """Start serving in ``nursery``, or by default in the session's own nursery (the host
        then lives as long as the session). Returns once listening.

        Raises:
            RuntimeError: the session is not open (``async with session:``).
            OSError: the address could not be bound.

        Cancellation: cancelling it before it returns stops the host (nothing stays bound);
        afterwards the host lives in that nursery (see :meth:`serve`).
        """
        if nursery is not None:
            await nursery.start(self.serve)
        else:
            await self._session.start_service(self.serve)
        return self   # what serve() passes to task_status.started

    async def serve(self, *, task_status: trio.TaskStatus[SessionHost] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Serve until the session closes or :meth:`aclose`; for ``nursery.start``.

        Cancellation: cancelling it closes every connection at once, without a goodbye;
        :meth:`aclose` is the graceful way.
        """
        if self._state is not _HostState.CREATED:
            raise RuntimeError("a SessionHost serves once")
        # Events are forwarded from synchronous callbacks, so that an event emitted before a
        # reply is queued before it; the iterator only tells when the session has closed.
        events = self._session.events()
        for name in FORWARDED_EVENTS:
            self._session.on(name, self._forward_event)
        try:
            self._listeners = await self._open_listeners()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_session, events)
                nursery.start_soon(self._service.run_turns)
                accept_scope = trio.CancelScope()
                nursery.start_soon(self._accept, accept_scope, nursery)
                self._state = _HostState.SERVING
                task_status.started(self)
                await self._stop_requested.wait()
                self._state = _HostState.STOPPING
                accept_scope.cancel()
                self._slots.close()
                await self._stop_connections()
                nursery.cancel_scope.cancel()
        finally:
            self._state = _HostState.STOPPED
            for name in FORWARDED_EVENTS:
                self._session.off(name, self._forward_event)
            # aclose_forcefully completes even while this task is being cancelled
            await _aclose_at_once(events)
            for listener in self._listeners:
                await trio.aclose_forcefully(listener)
            if self._path is not None and self._given_listeners is None:
                _unlink_socket(self._path)
            self._stopped.set()

    async def aclose(self) -> None:
        """Stop gracefully: answer pending requests with ``host_closing``, say goodbye to
        every client, close the listeners; returns when :meth:`serve` has returned.

        Cancellation: idempotent; cancelling the wait does not stop the shutdown.
        """
        if self._state is _HostState.CREATED:
            self._state = _HostState.STOPPED
            self._stopped.set()
            return
        self._stop_requested.set()
        await self._stopped.wait()

    async def serve_stream(self, stream: trio.abc.Stream) -> None:
        """Serve one connected stream until it ends (the accept loop calls this for each
        connection; use it directly for other transports, e.g. ``memory_stream_pair``).

        When every slot is taken, the stream first waits for one (see ``max_connections``).

        Cancellation: cancelling it closes the stream at once.
        """
        try:
            admitted = self._state is _HostState.SERVING and await self._slots.acquire()
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        if admitted and self._state is not _HostState.SERVING:
            self._slots.give_back()  # the host began stopping while it waited
            admitted = False
        if not admitted:
            code, message = (("too_many_connections",
                              f"too many connections (limit {self._max_connections})")
                             if self._state is _HostState.SERVING else self._stop_reason)
            await _refuse(stream, code, message, self._close_grace)
            return
        conn = Connection(stream, self._service, self._limits, self._counters, self._slots)
        self._slots.hold(conn)
        self._counters.connections_total += 1
        self._connections.add(conn)
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)
            self._connections_changed.unpark_all()

    # -- serving ------------------------------------------------------------------------------
    async def _open_listeners(self) -> list[trio.abc.Listener[Any]]:
        if self._given_listeners is not None:
            self._address = "custom"
            return list(self._given_listeners)
        if self._path is not None:
            sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
            try:
                await sock.bind(self._path)
                sock.listen(128)
            except BaseException:
                sock.close()
                raise
            self._address = f"unix:{self._path}"
            return [trio.SocketListener(sock)]
        host, port = self._bind
        listeners = await trio.open_tcp_listeners(port, host=host)
        sockname = listeners[0].socket.getsockname()
        self._port = int(sockname[1])
        shown = f"[{sockname[0]}]" if ":" in sockname[0] else sockname[0]
        self._address = f"{shown}:{self._port}"
        return list(listeners)

    async def _accept(self, scope: trio.CancelScope, nursery: trio.Nursery) -> None:
        if not self._listeners:
            return
        with scope:
            await trio.serve_listeners(self.serve_stream, self._listeners,
                                       handler_nursery=nursery)

    async def _stop_connections(self) -> None:
        code, message = self._stop_reason
        for conn in list(self._connections):
            conn.shutdown(code, message)
        with trio.move_on_after(self._close_grace * 2):
            while self._connections:
                await self._connections_changed.park()

    async def _watch_session(self, events: AsyncIterable[object]) -> None:
        """The end of the session's events is its close, which stops the host. Events of a
        name without a callback here are forwarded from this task."""
        async for event in events:
            if getattr(event, "type", "") not in FORWARDED_EVENTS:
                self._forward_event(event)
        self._stop_reason = ("session_closed", "the session closed")
        self._stop_requested.set()

    def _forward_event(self, event: object) -> None:
        """Fan one session event out to the subscribed connections (encoded once)."""
        name = getattr(event, "type", "")
        self._service.note_event(event)
        subscribers = [c for c in self._connections if c.subscribed]
        if not subscribers:
            return
        try:
            frame = encode_frame(Event(event=event_to_wire(event)))
        except Exception:  # one odd event must not stop the host, nor the emitting session
            logger.exception("session event %r has no wire form; not sent", name)
            return
        if len(frame) > self._limits.max_frame_size:
            self._counters.events_dropped += len(subscribers)
            return
        for conn in subscribers:
            conn.send_event(name, frame)


def _check_options(*, max_frame_size: int, max_connections: int, read_timeout: float,
                   idle_timeout: float | None, idle_timeout_when_full: float,
                   admission_timeout: float) -> None:
    if max_frame_size < 512:
        raise ValueError(f"max_frame_size must be at least 512 bytes, got {max_frame_size}")
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, got {max_connections}")
    seconds = {"read_timeout": read_timeout, "idle_timeout": idle_timeout,
               "idle_timeout_when_full": idle_timeout_when_full,
               "admission_timeout": admission_timeout}
    for name, value in seconds.items():
        if value is None and name == "idle_timeout":
            continue
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")


async def _refuse(stream: trio.abc.Stream, code: str, message: str, grace: float) -> None:
    try:
        with trio.move_on_after(grace):
            await stream.send_all(encode_frame(ErrorReply(code=code, message=message))
                                  + encode_frame(Goodbye(code=code, message=message)))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


def _unlink_socket(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class _Closable(Protocol):
    async def aclose(self) -> None: ...


async def _aclose_at_once(resource: _Closable) -> None:
    """``trio.aclose_forcefully`` for anything with ``aclose`` (the session's event stream)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        await resource.aclose()


async def serve_session(session: AgentSession, *,
                        task_status: trio.TaskStatus[SessionHost] = trio.TASK_STATUS_IGNORED,
                        **options: Any,  # noqa: ANN401 - SessionHost's keywords, typed there
                        ) -> None:
    """Serve ``session`` in the caller's nursery: ``host = await nursery.start(serve_session,
    session)`` (pass options with ``functools.partial``). See :class:`SessionHost` for the
    options; returns when the session closes or the host is closed.

    Cancellation: as :meth:`SessionHost.serve`: cancelling it closes every connection at once,
    without a goodbye.
    """
    await SessionHost(session, **options).serve(task_status=task_status)


@asynccontextmanager
async def open_session_host(session: AgentSession,
                            **options: Any,  # noqa: ANN401 - SessionHost's keywords, typed there
                            ) -> AsyncIterator[SessionHost]:
    """``async with open_session_host(session, port=0) as host:`` serves ``session`` in a
    nursery of its own; leaving the block closes the host gracefully (see
    :meth:`SessionHost.aclose`). See :class:`SessionHost` for the options. An exception of
    the body escapes as itself, not in an ``ExceptionGroup``.

    Cancellation: cancelling the block closes the connections at once.
    """
    host = SessionHost(session, **options)
    async with open_unwrapping_nursery() as nursery:
        await nursery.start(host.serve)
        try:
            yield host
        finally:
            await host.aclose()

