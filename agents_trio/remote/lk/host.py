"""SessionHost on LiveKit's protocol: serves a running AgentSession to LiveKit's
``RemoteSession`` (and ours, and LiveKit's console tooling) over ``AgentSessionMessage``
frames.

Request semantics follow LiveKit's ``SessionHost``: every request gets exactly one
``SessionResponse`` with its ``request_id``; ``run_input`` interrupts whatever the agent says
and runs one turn, answered with that turn's chat items or an ``error``; events are streamed
to every connection, as LiveKit streams them, without a subscription. Where LiveKit's host has
no answer of its own, ours says what went wrong in ``error``: a malformed frame, a message with
no request, a request without an id or of an unknown kind (request_id ``""`` when the frame
could not be read that far), a duplicate id, too many requests in flight, a session that has
not started an agent yet, a closing host.

Hardening, as the msgpack host has it: frame-size limit (1 MiB by default, LiveKit's own), a
bounded outbox per connection (a client that does not read its replies is cut; events that do
not fit are dropped and counted), pending-request limit per connection, connection limit with a
waiting room (``_slots.Slots``), read deadline (a frame must arrive whole within
``read_timeout``), optional idle deadline, and replies that fit the frame limit (the chat
history and the agent's chat context keep their newest items that fit).

Two directions: :meth:`SessionHost.serve` listens (TCP) for clients that dial in, as LiveKit's
``TcpSessionTransport`` does; :meth:`SessionHost.serve_stream` serves any connected stream,
e.g. one the agent dialled out to a console server (LiveKit's ``--connect-addr``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import trio
from google.protobuf.message import Message

from ...instructions import render_instructions
from ..._errors import SessionClosedError
from ...nurseries import open_unwrapping_nursery, single_leaf
from ...toolsets import function_tool_names
from .._outbox import Outbox
from .._slots import Slots
from .codec import (HEADER_SIZE, LIVEKIT_MAX_FRAME_SIZE, FrameDecoder, FrameTooLargeError,
                    WireError, decode_message, encode_message, pb, request_problem)
from .convert import (AGENT_STATE_TO_PB, FORWARDED_EVENTS, USER_STATE_TO_PB, UsageTotals,
                      encode_chat_items, encode_event, timestamp)

if TYPE_CHECKING:
    from ...session import AgentSession

logger = logging.getLogger("agents_trio.remote")


class ConsoleAudioIn(Protocol):
    """Where a console's microphone frames go (``tcp_console.ConsoleAudioInput``)."""

    def push_frame(self, frame: pb.AgentSessionMessage.ConsoleIO.AudioFrame) -> None: ...

    def close(self) -> None: ...


class ConsoleAudioOut(Protocol):
    """Where the agent's voice goes to a console (``tcp_console.ConsoleAudioOutput``)."""

    def attach(self, sink: Callable[[pb.AgentSessionMessage], None]) -> None: ...

    def detach(self) -> None: ...

    def notify_playout_finished(self) -> None: ...


class ConsolePort(Protocol):
    """A console connection's audio, both ways (``tcp_console.TcpConsoleIO``)."""

    @property
    def input(self) -> ConsoleAudioIn: ...

    @property
    def output(self) -> ConsoleAudioOut: ...

SimulationEnd = Callable[[bool, str], Awaitable["tuple[bool, str] | None"]]
"""``on_simulation_end(provisional_success, provisional_reason)``: the agent's own verdict
(success, reason), or None for none."""


_INLINE = frozenset({"ping", "get_chat_history", "get_agent_info", "get_framework_info",
                     "get_session_state", "get_session_usage", "get_rtc_stats", "update_io"})


def _framework_version() -> str:
    try:
        from importlib.metadata import version
        return version("agents_trio")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0.1.0"


@dataclass
class LkHostStatistics:
    """A snapshot of a host, for tests and monitoring."""

    connections: int = 0
    connections_total: int = 0
    pending_requests: int = 0
    frames_received: int = 0
    replies_sent: int = 0
    errors_sent: int = 0
    events_sent: int = 0
    events_dropped: int = 0
    messages_ignored: int = 0
    connections_overflowed: int = 0
    connections_timed_out: int = 0
    connections_evicted: int = 0
    connections_refused: int = 0
    connections_waiting: int = 0


@dataclass(frozen=True)
class _Limits:
    max_frame_size: int
    max_pending_requests: int
    max_outbox: int
    close_grace: float
    read_timeout: float
    idle_timeout: float | None


def _response(request_id: str, *, error: str | None = None,
              **kind: Message) -> pb.AgentSessionMessage:
    response = pb.SessionResponse(request_id=request_id, error=error)
    for name, body in kind.items():
        getattr(response, name).CopyFrom(body)
    return pb.AgentSessionMessage(response=response)


class _Refusal(Exception):
    """A request answered with ``error`` (and, as LiveKit does, its empty response kind)."""

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


class _Connection:
    """One client; see the module docstring of ``remote._connection`` for the deadlines."""

    def __init__(self, host: SessionHost, stream: trio.abc.Stream,
                 console: ConsolePort | None = None) -> None:
        self._host = host
        self._stream = stream
        self._console = console
        limits = host.limits
        self._limits = limits
        self._stats = host.stats
        self._frame_started: float | None = None
        self._last_request = trio.current_time()
        self._eviction_deadline = math.inf
        self._read_scope: trio.CancelScope | None = None
        # frames are bounded in number and in bytes: big replies must not pile up either
        self._outbox = Outbox(max_frames=limits.max_outbox,
                              max_bytes=4 * (limits.max_frame_size + HEADER_SIZE))
        self._pending: dict[str, trio.CancelScope] = {}
        self._requests_scope = trio.CancelScope()
        self._handlers: trio.Nursery | None = None
        self._farewell: str | None = None
        self._overflowed = False

    @property
    def pending_requests(self) -> int:
        return len(self._pending)

    @property
    def quiet_since(self) -> float | None:
        return None if self._pending else self._last_request

    def set_eviction_deadline(self, deadline: float) -> None:
        self._eviction_deadline = deadline
        self._rearm()

    # -- lifecycle
    async def run(self) -> None:
        if self._console is not None:
            self._console.output.attach(self._send_console)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop)
                try:
                    with self._requests_scope:
                        async with trio.open_nursery() as handlers:
                            self._handlers = handlers
                            await self._read_loop()
                            handlers.cancel_scope.cancel()
                finally:
                    self._host.slots.release(self)
                if self._farewell is not None:
                    for request_id in list(self._pending):
                        self.send_error(request_id, self._farewell)
                self._pending.clear()
                self._outbox.close()
                if not self._overflowed:
                    with trio.move_on_after(self._limits.close_grace):
                        await self._outbox.drained.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._pending.clear()
            if self._console is not None:
                self._console.output.detach()
                self._console.input.close()
            await trio.aclose_forcefully(self._stream)

    def _send_console(self, message: pb.AgentSessionMessage) -> None:
        if not self._send(encode_message(message), reply=False):
            self._stats.events_dropped += 1

    def shutdown(self, reason: str) -> None:
        """Answer every pending request with ``reason`` and close. Idempotent."""
        if self._farewell is None:
            self._farewell = reason
        self._requests_scope.cancel()

    # -- reading
    async def _read_loop(self) -> None:
        decoder = FrameDecoder(self._limits.max_frame_size)
        while True:
            try:
                payload = decoder.next_frame()
            except FrameTooLargeError as e:
                self._close_for_frame(e)
                return
            if payload is None:
                data = await self._receive()
                if data is None:
                    return
                if not data:
                    error = decoder.end_of_stream()
                    if error is not None:
                        self._close_for_frame(error)
                    return
                if not decoder.buffered:
                    self._frame_started = trio.current_time()
                decoder.feed(bytes(data))
                continue
            self._frame_started = trio.current_time() if decoder.buffered else None
            self._stats.frames_received += 1
            try:
                message = decode_message(payload)
            except WireError as e:
                self.send_error("", e.message)
            else:
                self._dispatch(message)
            self._quiet_changed()
            await trio.lowlevel.checkpoint()  # a flood in one read must still let others run

    async def _receive(self) -> bytes | bytearray | None:
        with trio.CancelScope(deadline=self._deadline()) as scope:
            self._read_scope = scope
            try:
                return await self._stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            finally:
                self._read_scope = None
        self._time_out()
        return None

    def _deadline(self) -> float:
        deadline = math.inf
        if self._frame_started is not None:
            deadline = self._frame_started + self._limits.read_timeout
        quiet_since = self.quiet_since
        if quiet_since is not None:
            if self._limits.idle_timeout is not None:
                deadline = min(deadline, quiet_since + self._limits.idle_timeout)
            deadline = min(deadline, self._eviction_deadline)
        return deadline

    def _rearm(self) -> None:
        if self._read_scope is not None:
            self._read_scope.deadline = self._deadline()

    def _quiet_changed(self) -> None:
        self._rearm()
        self._host.slots.quiet_changed()

    def _time_out(self) -> None:
        now = trio.current_time()
        if self._frame_started is not None and \
                now >= self._frame_started + self._limits.read_timeout:
            reason = (f"read timeout: a frame took more than {self._limits.read_timeout:g} s "
                      f"to arrive")
            self._stats.connections_timed_out += 1
        elif now >= self._eviction_deadline:
            reason = "idle timeout: closed to make room for a waiting client (the host is full)"
            self._stats.connections_evicted += 1
        else:
            reason = f"idle timeout: no request for {self._limits.idle_timeout:g} s"
            self._stats.connections_timed_out += 1
        logger.info("closing a LiveKit-protocol connection: %s", reason)
        self.send_error("", reason)
        self._farewell = self._farewell or reason

    def _close_for_frame(self, error: WireError) -> None:
        logger.info("closing a LiveKit-protocol connection: %s", error)
        self.send_error("", f"{error.message}; closing")
        self._farewell = self._farewell or error.message

    def _dispatch(self, message: pb.AgentSessionMessage) -> None:
        kind = message.WhichOneof("message")
        if kind != "request":
            if kind == "audio_input" and self._console is not None:
                self._console.input.push_frame(message.audio_input)
            elif kind == "audio_playback_finished" and self._console is not None:
                self._console.output.notify_playout_finished()
            elif kind is None:
                self.send_error("", "the message carries nothing this host knows "
                                    "(no request, no console I/O)")
            else:
                self._stats.messages_ignored += 1  # responses, events: not a host's to take
            return
        request = message.request
        problem = request_problem(request)
        if problem is not None:
            self.send_error(request.request_id, problem)
            return
        self._last_request = trio.current_time()
        request_id = request.request_id
        if request_id in self._pending:
            self.send_error(request_id, f"request id {request_id!r} is already pending")
            return
        req_kind = request.WhichOneof("request")
        if req_kind in _INLINE:
            try:
                reply = self._host.answer_now(request)
            except _Refusal as e:
                self.send_error(request_id, e.message, e.kind)
            except Exception as e:  # a bug answering one request fails only that request
                logger.exception("a LiveKit-protocol request failed")
                self.send_error(request_id, f"internal error: {type(e).__name__}: {e}")
            else:
                self.send(reply)
            return
        if len(self._pending) >= self._limits.max_pending_requests:
            self.send_error(request_id, f"too many pending requests on this connection "
                                        f"(limit {self._limits.max_pending_requests})")
            return
        scope = trio.CancelScope()
        self._pending[request_id] = scope
        assert self._handlers is not None
        self._handlers.start_soon(self._handle, request, scope)

    async def _handle(self, request: pb.SessionRequest, scope: trio.CancelScope) -> None:
        with scope:
            try:
                reply = await self._host.answer(request)
            except _Refusal as e:
                reply = _error_reply(request.request_id, e.message, e.kind)
            except Exception as e:  # noqa: BLE001
                logger.exception("a LiveKit-protocol request failed")
                reply = _error_reply(request.request_id,
                                     f"internal error: {type(e).__name__}: {e}")
            if self._pending.get(request.request_id) is scope:
                del self._pending[request.request_id]
                self.send(reply)
                self._last_request = trio.current_time()
                self._quiet_changed()

    # -- writing
    def send(self, message: pb.AgentSessionMessage) -> None:
        frame = encode_message(message)
        response = message.response
        if len(frame) - HEADER_SIZE > self._limits.max_frame_size:
            self.send_error(response.request_id,
                            f"the response of {len(frame) - HEADER_SIZE} bytes exceeds the "
                            f"limit of {self._limits.max_frame_size} bytes")
            return
        if response.error:
            self._stats.errors_sent += 1
        else:
            self._stats.replies_sent += 1
        self._send(frame, reply=True)

    def send_error(self, request_id: str, error: str, kind: str | None = None) -> None:
        self.send(_error_reply(request_id, error[:4096], kind))

    def send_event(self, frame: bytes) -> None:
        if self._send(frame, reply=False):
            self._stats.events_sent += 1
        else:
            self._stats.events_dropped += 1

    def _send(self, frame: bytes, *, reply: bool) -> bool:
        try:
            self._outbox.put(frame)
        except trio.WouldBlock:
            if reply:
                logger.warning("closing a connection whose client does not read its replies")
                self._stats.connections_overflowed += 1
                self._overflowed = True
                self._requests_scope.cancel()
            return False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def _write_loop(self) -> None:
        try:
            await self._outbox.write_to(self._stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._requests_scope.cancel()


def _error_reply(request_id: str, error: str, kind: str | None = None) -> pb.AgentSessionMessage:
    response = pb.SessionResponse(request_id=request_id, error=error)
    if kind is not None:
        getattr(response, kind).SetInParent()  # LiveKit answers a failed run with both
    return pb.AgentSessionMessage(response=response)


@dataclass
class _Turn:
    text: str
    done: trio.Event = field(default_factory=trio.Event)
    items: list[pb.ChatContext.ChatItem] = field(default_factory=list)
    error: str | None = None
    abandoned: bool = False


class SessionHost:
    """Serves ``session`` on LiveKit's remote-session protocol.

    Args:
        session: The agents_trio ``AgentSession`` to serve.
        host, port: TCP address to listen on (``port=0`` picks a free port).
        listeners: Serve these listeners instead (``[]``: only :meth:`serve_stream`).
        max_frame_size: Largest frame taken and sent, in bytes (LiveKit's 1 MiB by default;
            a larger limit would let replies out that LiveKit's client refuses).
        max_pending_requests: ``run_input``/``finalize_simulation`` in flight per connection.
        max_connections, idle_timeout_when_full, admission_timeout: the connection slots and
            their waiting room (see ``remote._slots``); a client refused a slot gets one
            response with request_id ``""`` saying so, then the connection closes.
        max_outbox: Frames queued for one client before it counts as not reading.
        read_timeout: Seconds a frame may take from its first byte to its last.
        idle_timeout: Seconds a connection may go without a request (None, the default:
            never; LiveKit's clients listen to events quietly for as long as they like).
        close_grace: Seconds a closing connection has to flush its last answers.
        on_simulation_end: Answers ``finalize_simulation`` with the agent's own verdict;
            without it the response carries no verdict, as LiveKit's does outside a
            simulation job.

    Console audio (``audio_input``, ``audio_playback_finished``) is taken only on a console
    connection (:meth:`connect` or :meth:`serve_stream` with ``console=``); elsewhere it is
    ignored.
    """

    def __init__(self, session: AgentSession, *, host: str = "127.0.0.1", port: int = 0,
                 listeners: list[trio.abc.Listener[Any]] | None = None,
                 max_frame_size: int = LIVEKIT_MAX_FRAME_SIZE, max_pending_requests: int = 32,
                 max_connections: int = 32, max_outbox: int = 256, close_grace: float = 1.0,
                 read_timeout: float = 10.0, idle_timeout: float | None = None,
                 idle_timeout_when_full: float = 1.0, admission_timeout: float = 5.0,
                 on_simulation_end: SimulationEnd | None = None) -> None:
        if max_frame_size < 512:
            raise ValueError(f"max_frame_size must be at least 512 bytes, got {max_frame_size}")
        if max_connections < 1 or max_pending_requests < 1 or max_outbox < 1:
            raise ValueError("max_connections, max_pending_requests and max_outbox must be "
                             "at least 1")
        for name, value in {"read_timeout": read_timeout, "close_grace": close_grace,
                            "idle_timeout_when_full": idle_timeout_when_full,
                            "admission_timeout": admission_timeout,
                            "idle_timeout": 1.0 if idle_timeout is None else idle_timeout
                            }.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        self._session = session
        self._bind = (host, port)
        self._given_listeners = listeners
        self._listeners: list[trio.abc.Listener[Any]] = []
        self.limits = _Limits(max_frame_size=max_frame_size,
                              max_pending_requests=max_pending_requests, max_outbox=max_outbox,
                              close_grace=close_grace, read_timeout=read_timeout,
                              idle_timeout=idle_timeout)
        self.slots = Slots(max_connections, idle_when_full=idle_timeout_when_full,
                           wait_timeout=admission_timeout)
        self.stats = LkHostStatistics()
        self._max_connections = max_connections
        self._on_simulation_end = on_simulation_end
        self._connections: set[_Connection] = set()
        self._connections_changed = trio.lowlevel.ParkingLot()
        self._serving = False
        self._started = False
        self._stop_requested = trio.Event()
        self._stop_reason = "the host is closing"
        self._stopped = trio.Event()
        self._turns_send, self._turns_recv = trio.open_memory_channel[_Turn](math.inf)
        self._created_at = trio.current_time()
        self._version = _framework_version()
        self._usage = UsageTotals(session)
        self._port: int | None = None
        self._address: str | None = None

    # -- public
    @property
    def address(self) -> str:
        """``"HOST:PORT"`` once listening on TCP."""
        if self._address is None:
            raise RuntimeError("the host is not listening")
        return self._address

    @property
    def port(self) -> int | None:
        return self._port

    def statistics(self) -> LkHostStatistics:
        stats = LkHostStatistics(**vars(self.stats))
        stats.connections = len(self._connections)
        stats.pending_requests = sum(c.pending_requests for c in self._connections)
        stats.connections_waiting = self.slots.waiting
        return stats

    async def serve(self, *, task_status: trio.TaskStatus[SessionHost] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Serve until the session closes or :meth:`aclose`; for ``nursery.start``.

        Cancellation: cancelling it closes every connection at once, without answering their
        pending requests; :meth:`aclose` is the graceful way.
        """
        if self._started:
            raise RuntimeError("a SessionHost serves once")
        self._started = True
        events = self._session.events()
        for name in FORWARDED_EVENTS:
            self._session.on(name, self._forward_event)
        self._session.on("metrics_collected", self._on_metrics)
        try:
            self._listeners = await self._open_listeners()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_session, events)
                nursery.start_soon(self._run_turns)
                accept_scope = trio.CancelScope()
                nursery.start_soon(self._accept, accept_scope, nursery)
                self._serving = True
                task_status.started(self)
                await self._stop_requested.wait()
                self._serving = False
                accept_scope.cancel()
                self.slots.close()
                for conn in list(self._connections):
                    conn.shutdown(self._stop_reason)
                with trio.move_on_after(self.limits.close_grace * 2):
                    while self._connections:
                        await self._connections_changed.park()
                nursery.cancel_scope.cancel()
        finally:
            self._serving = False
            for name in FORWARDED_EVENTS:
                self._session.off(name, self._forward_event)
            self._session.off("metrics_collected", self._on_metrics)
            await _aclose_at_once(events)
            for listener in self._listeners:
                await trio.aclose_forcefully(listener)
            self._stopped.set()

    async def aclose(self) -> None:
        """Stop: pending requests are answered with an error, connections closed; returns
        when :meth:`serve` has returned.

        Cancellation: idempotent; cancelling the wait does not stop the shutdown.
        """
        if not self._started:
            self._started = True
            self._stopped.set()
            return
        self._stop_requested.set()
        await self._stopped.wait()

    async def wait_stopped(self) -> None:
        """Wait until the host has stopped (the session closed, or :meth:`aclose`).

        Cancellation: only the wait ends.
        """
        await self._stopped.wait()

    async def serve_stream(self, stream: trio.abc.Stream, *,
                           console: ConsolePort | None = None) -> None:
        """Serve one connected stream until it ends (accepted, or dialled out); with
        ``console``, it also carries that console's audio (see ``tcp_console``).

        When every slot is taken, the stream first waits for one (see ``max_connections``).

        Cancellation: cancelling it closes the stream at once.
        """
        try:
            admitted = self._serving and await self.slots.acquire()
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        if admitted and not self._serving:
            self.slots.give_back()
            admitted = False
        if not admitted:
            self.stats.connections_refused += 1
            reason = (f"too many connections (limit {self._max_connections})"
                      if self._serving else self._stop_reason)
            await _refuse(stream, reason, self.limits.close_grace)
            return
        conn = _Connection(self, stream, console)
        self.slots.hold(conn)
        self.stats.connections_total += 1
        self._connections.add(conn)
        try:
            await conn.run()
        finally:
            self._connections.discard(conn)
            self._connections_changed.unpark_all()

    async def connect(self, host: str, port: int, *,
                      console: ConsolePort | None = None) -> None:
        """Dial ``host:port`` (a console server, as LiveKit's ``--connect-addr``) and serve
        that connection until it ends; ``console``: its audio goes on it too.

        Raises:
            OSError: the console server cannot be reached.

        Cancellation: cancelling it closes the connection at once.
        """
        stream = await trio.open_tcp_stream(host, port)
        _nodelay(stream)
        await self.serve_stream(stream, console=console)

    # -- serving
    async def _open_listeners(self) -> list[trio.abc.Listener[Any]]:
        if self._given_listeners is not None:
            return list(self._given_listeners)
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
            await trio.serve_listeners(self._serve_accepted, self._listeners,
                                       handler_nursery=nursery)

    async def _serve_accepted(self, stream: trio.abc.Stream) -> None:
        _nodelay(stream)
        await self.serve_stream(stream)

    async def _watch_session(self, events: AsyncIterable[object]) -> None:
        async for _ in events:
            pass
        self._stop_reason = "the session closed"
        self._stop_requested.set()

    def _on_metrics(self, event: object) -> None:
        """Usage totals from the session's metrics; each change is streamed as LiveKit's
        ``session_usage_updated``."""
        try:
            changed = self._usage.add(getattr(event, "metrics", None))
        except (TypeError, ValueError):  # a metrics record of an odd shape is not counted
            return
        if changed:
            E = pb.AgentSessionEvent  # noqa: N806
            usage_event = E(session_usage_updated=E.SessionUsageUpdated(
                usage=self._usage.to_pb()))
            usage_event.created_at.CopyFrom(timestamp(trio.current_time()))
            self._broadcast(usage_event)

    def _forward_event(self, event: object) -> None:
        if not self._connections:
            return
        try:
            encoded = encode_event(event)
        except Exception:  # one odd event must not stop the host, nor the emitting session
            logger.exception("session event %r has no LiveKit form; not sent", event)
            return
        if encoded is not None:
            self._broadcast(encoded)

    def _broadcast(self, encoded: pb.AgentSessionEvent) -> None:
        if not self._connections:
            return
        frame = encode_message(pb.AgentSessionMessage(event=encoded))
        if len(frame) - HEADER_SIZE > self.limits.max_frame_size:
            self.stats.events_dropped += len(self._connections)
            return
        for conn in list(self._connections):
            conn.send_event(frame)

    # -- requests
    def _ready(self) -> bool:
        return bool(self._session.agent_state != "initializing")

    def _require_ready(self) -> None:
        if not self._ready():
            raise _Refusal("the session has not started an agent yet")

    def answer_now(self, request: pb.SessionRequest) -> pb.AgentSessionMessage:
        kind = request.WhichOneof("request")
        rid = request.request_id
        R = pb.SessionResponse  # noqa: N806
        if kind == "ping":
            self._require_ready()  # so that LiveKit's wait_for_ready waits for the agent
            return _response(rid, pong=R.Pong())
        if kind == "get_chat_history":
            items = self._fitting_items(self._session.history.items)
            return _response(rid, get_chat_history=R.GetChatHistoryResponse(items=items))
        if kind == "get_agent_info":
            self._require_ready()
            agent = self._session.current_agent
            return _response(rid, get_agent_info=R.GetAgentInfoResponse(
                id=agent.id, instructions=render_instructions(agent.instructions),
                tools=function_tool_names(agent.tools),
                chat_ctx=self._fitting_items(agent.chat_ctx.items)))
        if kind == "get_session_state":
            self._require_ready()
            session = self._session
            return _response(rid, get_session_state=R.GetSessionStateResponse(
                agent_state=AGENT_STATE_TO_PB.get(session.agent_state, pb.AS_IDLE),
                user_state=USER_STATE_TO_PB.get(session.user_state, pb.US_LISTENING),
                agent_id=session.current_agent.id, options=_options(session),
                created_at=timestamp(self._created_at)))
        if kind == "get_framework_info":
            return _response(rid, get_framework_info=R.GetFrameworkInfoResponse(
                sdk="python", sdk_version=self._version))
        if kind == "get_session_usage":
            return _response(rid, get_session_usage=R.GetSessionUsageResponse(
                usage=self._usage.to_pb(), created_at=timestamp(trio.current_time())))
        if kind == "get_rtc_stats":
            return _response(rid, get_rtc_stats=R.GetRTCStatsResponse())
        assert kind == "update_io"
        _apply_update_io(self._session, request.update_io)
        return _response(rid, update_io=R.UpdateIOResponse())

    async def answer(self, request: pb.SessionRequest) -> pb.AgentSessionMessage:
        """The answer to a request that waits on the session (``run_input``,
        ``finalize_simulation``).

        Cancellation: cancelling it (the connection ended, or the host closes) abandons the
        reply; a ``run_input`` turn still queued is dropped, and one already running finishes
        with its answer going nowhere.
        """
        kind = request.WhichOneof("request")
        rid = request.request_id
        R = pb.SessionResponse  # noqa: N806
        if kind == "finalize_simulation":
            return await self._finalize(request)
        assert kind == "run_input"
        text = request.run_input.text
        if not text.strip():
            raise _Refusal("empty run_input text", kind="run_input")
        self._require_ready()
        turn = _Turn(text)
        # as LiveKit's host, interrupt the agent when the turn arrives (the turn being played
        # then ends, interrupted); the turns themselves still run one at a time, in order
        self._barge_in()
        self._turns_send.send_nowait(turn)
        try:
            await turn.done.wait()
        finally:
            turn.abandoned = not turn.done.is_set()
        if turn.error is not None:
            raise _Refusal(turn.error, kind="run_input")
        return _response(rid, run_input=R.RunInputResponse(items=turn.items))

    async def _finalize(self, request: pb.SessionRequest) -> pb.AgentSessionMessage:
        R = pb.SessionResponse  # noqa: N806
        fin = request.finalize_simulation
        response = R.FinalizeSimulationResponse()
        error: str | None = None
        if self._on_simulation_end is not None:
            try:
                verdict = await self._on_simulation_end(fin.provisional_success,
                                                        fin.provisional_reason)
            except Exception as e:  # noqa: BLE001 - the error is the answer, as in LiveKit
                logger.exception("error while executing the on_simulation_end callback")
                error = str(e) or type(e).__name__
            else:
                if verdict is not None:
                    response.user_verdict.CopyFrom(R.FinalizeSimulationResponse.SimulationVerdict(
                        success=verdict[0], reason=verdict[1]))
        return _response(request.request_id, error=error, finalize_simulation=response)

    async def _run_turns(self) -> None:
        async for turn in self._turns_recv:
            if not turn.abandoned:
                await self._play(turn)

    def _barge_in(self) -> None:
        try:
            self._session.interrupt(force=True)
        except RuntimeError:
            pass  # nothing to interrupt

    async def _play(self, turn: _Turn) -> None:
        session = self._session
        try:
            self._barge_in()  # whatever started since the turn arrived
            result = await session.run(user_input=turn.text)
            turn.items = encode_chat_items(ev.item for ev in result.events)
        except SessionClosedError as e:
            turn.error = f"the session closed during the turn ({e})"
        except Exception as e:  # noqa: BLE001 - any failure of the turn is the client's answer
            error = single_leaf(e)
            turn.error = str(error) or type(error).__name__
        turn.done.set()

    def _fitting_items(self, items: list[Any]) -> list[pb.ChatContext.ChatItem]:
        """The newest items whose response fits the frame limit (oldest dropped first)."""
        encoded = encode_chat_items(items)
        budget = self.limits.max_frame_size - 256  # the response around them
        kept: list[pb.ChatContext.ChatItem] = []
        for item in reversed(encoded):
            size = item.ByteSize() + 6  # the repeated field's tag and length
            if size > budget:
                break
            budget -= size
            kept.append(item)
        if len(kept) < len(encoded):
            logger.info("sending the newest %d of %d chat items (frame limit %d bytes)",
                        len(kept), len(encoded), self.limits.max_frame_size)
        kept.reverse()
        return kept


def _options(session: AgentSession) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in ("turn_detection",):
        value = getattr(session, name, None)
        if value is not None:
            out[name] = str(value)
    return out


def _apply_update_io(session: AgentSession, update: pb.SessionRequest.UpdateIO) -> None:
    """Apply the channels the request sets, where the session's I/O has such a switch."""
    sides = [("input", update.input, ("audio_enabled", "video_enabled")),
             ("output", update.output,
              ("audio_enabled", "video_enabled", "transcription_enabled"))]
    for side, fields, names in sides:
        if not update.HasField(side):
            continue
        io = getattr(session, side, None)
        for name in names:
            if fields.HasField(name):
                setter = getattr(io, f"set_{name}", None)
                if callable(setter):
                    setter(getattr(fields, name))


class _Closable(Protocol):
    async def aclose(self) -> None: ...


async def _aclose_at_once(resource: _Closable) -> None:
    """``trio.aclose_forcefully`` for anything with ``aclose`` (the session's event stream)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        await resource.aclose()


def _nodelay(stream: trio.abc.Stream) -> None:
    if isinstance(stream, trio.SocketStream):
        try:
            stream.setsockopt(trio.socket.IPPROTO_TCP, trio.socket.TCP_NODELAY, True)
        except OSError:
            pass


async def _refuse(stream: trio.abc.Stream, reason: str, grace: float) -> None:
    try:
        with trio.move_on_after(grace):
            await stream.send_all(encode_message(_error_reply("", reason)))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


@asynccontextmanager
async def open_session_host(session: AgentSession,
                            **options: Any,  # noqa: ANN401 - SessionHost's keywords, typed there
                            ) -> AsyncIterator[SessionHost]:
    """``async with open_session_host(session, port=0) as host:`` serves ``session`` on
    LiveKit's protocol in a nursery of its own; leaving the block closes the host.

    Cancellation: cancelling the block closes the connections at once.
    """
    host = SessionHost(session, **options)
    async with open_unwrapping_nursery() as nursery:
        await nursery.start(host.serve)
        try:
            yield host
        finally:
            await host.aclose()
