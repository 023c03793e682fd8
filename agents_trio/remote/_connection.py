"""One client connection of a SessionHost: framing, request bookkeeping, the outbox.

A connection runs three kinds of work, all inside :meth:`Connection.run`:

- the reader decodes frames and dispatches requests. Cheap requests are answered inline;
  slow ones (``run``, ``wait_for_ready``) get a handler task with its own cancel scope, kept
  in ``_pending`` by request id so that a ``Cancel`` or a shutdown can find it;
- handlers await the host and put their reply in the outbox;
- the writer sends the outbox, coalescing frames.

Every frame the connection sends goes through the bounded outbox, so no task ever blocks on
a client that does not read: a reply that does not fit closes the connection (the client is
not reading), an event that does not fit is dropped and counted.

A protocol error in a complete frame is answered and the connection stays open; a frame that
is too large or truncated cannot be skipped, so it is answered and the connection closes.
End of input from the client abandons its pending requests: it is gone.

Deadlines bound what a client can hold without using it. The reader waits for bytes under one
cancel scope whose deadline is the earliest of: the read deadline (``read_timeout`` after the
first byte of a frame that is not complete yet), the idle deadline (``idle_timeout`` after the
last request or answer) and the eviction deadline (set by the host's :class:`Slots` when
newcomers wait for a slot). The deadline is recomputed whenever one of its inputs changes.
A connection that is subscribed to events, or has a request in flight, has no idle or eviction
deadline: quiet is normal for a listener, and one that waits for a turn waits for the host.
A deadline that passes closes the connection with a goodbye (``read_timeout`` or
``idle_timeout``) and a log line.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Protocol

import msgspec
import trio

from ._outbox import Outbox
from .wire import (HEADER_SIZE, Cancel, ErrorReply, FrameDecoder, FrameTooLargeError, Goodbye,
                   Message, RequestMessage, WireError, decode_request, encode_frame)

logger = logging.getLogger("agents_trio.remote")


class Refusal(Exception):
    """Raised by a request handler: the request fails with ``code`` and ``message``."""

    def __init__(self, code: str, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.error_type = error_type


class RequestHandler(Protocol):
    def answer_now(self, conn: Connection, request: RequestMessage) -> Message | None:
        """The reply, or None when the request needs :meth:`answer` (a task)."""

    async def answer(self, conn: Connection, request: RequestMessage) -> Message:
        """The reply to a request that needs waiting for (run in the connection's nursery).

        Cancellation: the request is dropped (the client withdrew it, or the connection
        closes); no reply is sent.
        """


class SlotKeeper(Protocol):
    """The host's slots, as a connection sees them (see ``_slots.Slots``)."""

    def quiet_changed(self) -> None: ...

    def release(self, holder: Connection) -> None: ...


@dataclass
class Counters:
    """Mutable counters shared by a host and its connections."""

    connections_total: int = 0
    frames_received: int = 0
    replies_sent: int = 0
    errors_sent: int = 0
    events_dropped: int = 0
    connections_overflowed: int = 0
    connections_timed_out: int = 0
    connections_evicted: int = 0


@dataclass(frozen=True)
class ConnectionLimits:
    max_frame_size: int
    max_pending_requests: int
    max_outbox: int
    close_grace: float
    read_timeout: float = 10.0
    idle_timeout: float | None = 3600.0


class Connection:
    """Serves one stream; see the module docstring."""

    def __init__(self, stream: trio.abc.Stream, handler: RequestHandler,
                 limits: ConnectionLimits, counters: Counters, slots: SlotKeeper) -> None:
        self._stream = stream
        self._handler = handler
        self._limits = limits
        self._counters = counters
        self._slots = slots
        # deadline inputs (Trio times): see the module docstring
        self._frame_started: float | None = None
        self._last_request = trio.current_time()
        self._eviction_deadline = math.inf
        self._read_scope: trio.CancelScope | None = None
        # frames are bounded in number and in bytes: big replies must not pile up either
        self._outbox = Outbox(max_frames=limits.max_outbox,
                              max_bytes=4 * (limits.max_frame_size + HEADER_SIZE))
        self._pending: dict[int, trio.CancelScope] = {}
        self._requests_scope = trio.CancelScope()
        self._handlers: trio.Nursery | None = None
        self._farewell: tuple[str, str] | None = None
        self._overflowed = False
        self.subscription: frozenset[str] | None = None
        self.subscribed = False

    @property
    def pending_requests(self) -> int:
        return len(self._pending)

    @property
    def quiet_since(self) -> float | None:
        """Trio time of the last request or answer, or None while the connection is not idle
        by definition (subscribed, or a request in flight)."""
        if self.subscribed or self._pending:
            return None
        return self._last_request

    def set_eviction_deadline(self, deadline: float) -> None:
        """Close at ``deadline`` unless a request comes first (the host is full); ``inf``:
        never."""
        self._eviction_deadline = deadline
        self._rearm()

    # -- lifecycle ----------------------------------------------------------------------------
    async def run(self) -> None:
        """Serve until the client leaves, a fatal frame, or :meth:`shutdown`.

        Cancellation: cancelling it closes the stream at once, without a goodbye.
        """
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
                    self._slots.release(self)  # a goodbye on its way needs no slot
                self._finish()
                if not self._overflowed:
                    with trio.move_on_after(self._limits.close_grace):
                        await self._outbox.drained.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._pending.clear()
            await trio.aclose_forcefully(self._stream)

    def shutdown(self, code: str, message: str) -> None:
        """Answer every pending request with ``code``, say goodbye, and close. Idempotent."""
        if self._farewell is None:
            self._farewell = (code, message)
        self._requests_scope.cancel()

    def _finish(self) -> None:
        if self._farewell is not None:
            code, message = self._farewell
            for request_id in list(self._pending):
                self.send_error(request_id, code, message)
            self._pending.clear()
            self._send(encode_frame(Goodbye(code=code, message=message)), reply=True)
        self._outbox.close()

    # -- reading ------------------------------------------------------------------------------
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
                decoder.feed(data)
                continue
            # what is left of the chunk is the start of the next frame
            self._frame_started = trio.current_time() if decoder.buffered else None
            self._counters.frames_received += 1
            try:
                request = decode_request(payload)
            except WireError as e:
                self.send_error(e.request_id, e.code, e.message)
            else:
                self._last_request = trio.current_time()
                self._dispatch(request)
            self._quiet_changed()
            # a flood of frames in one read must still let the session run
            await trio.lowlevel.checkpoint()

    async def _receive(self) -> bytes | bytearray | None:
        """The next bytes (``b""`` at the end of input), or None when a deadline passed or
        the stream broke."""
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
        self._slots.quiet_changed()

    def _time_out(self) -> None:
        now = trio.current_time()
        if self._frame_started is not None and \
                now >= self._frame_started + self._limits.read_timeout:
            code = "read_timeout"
            message = (f"a frame took more than {self._limits.read_timeout:g} s to arrive "
                       f"({now - self._frame_started:.3g} s without its end)")
            self._counters.connections_timed_out += 1
        elif now >= self._eviction_deadline:
            code = "idle_timeout"
            message = (f"idle: no request for {now - self._last_request:.3g} s while other "
                       f"clients wait for a slot (the host is full)")
            self._counters.connections_evicted += 1
        else:
            code = "idle_timeout"
            message = f"idle: no request for {self._limits.idle_timeout:g} s"
            self._counters.connections_timed_out += 1
        logger.info("closing a connection (%s): %s", code, message)
        self._farewell = self._farewell or (code, message)

    def _close_for_frame(self, error: WireError) -> None:
        logger.info("closing a connection: %s", error)
        self.send_error(None, error.code, error.message)
        self._farewell = self._farewell or (error.code, f"{error.message}; closing")

    def _dispatch(self, request: RequestMessage) -> None:
        if isinstance(request, Cancel):
            scope = self._pending.pop(request.id, None)
            if scope is not None:
                scope.cancel()
            return
        if request.id in self._pending:
            self.send_error(request.id, "duplicate_request_id",
                            f"request id {request.id} is already pending")
            return
        try:
            reply = self._handler.answer_now(self, request)
        except Refusal as e:
            self.send_error(request.id, e.code, e.message, e.error_type)
            return
        except Exception as e:  # a bug answering one request fails only that request
            logger.exception("a remote-session request failed")
            self.send_error(request.id, "internal_error", f"{type(e).__name__}: {e}",
                            type(e).__name__)
            return
        if reply is not None:
            self.send(reply)
            return
        if len(self._pending) >= self._limits.max_pending_requests:
            self.send_error(request.id, "too_many_requests",
                            f"too many pending requests on this connection "
                            f"(limit {self._limits.max_pending_requests})")
            return
        scope = trio.CancelScope()
        self._pending[request.id] = scope
        assert self._handlers is not None
        self._handlers.start_soon(self._handle, request, scope)

    async def _handle(self, request: RequestMessage, scope: trio.CancelScope) -> None:
        with scope:
            try:
                reply: Message = await self._handler.answer(self, request)
            except Refusal as e:
                reply = ErrorReply(id=request.id, code=e.code, message=e.message,
                                   error_type=e.error_type)
            except Exception as e:
                logger.exception("a remote-session request failed")
                reply = ErrorReply(id=request.id, code="internal_error",
                                   message=f"{type(e).__name__}: {e}",
                                   error_type=type(e).__name__)
            # a Cancel that arrived meanwhile removed the entry: no reply then
            if self._pending.get(request.id) is scope:
                del self._pending[request.id]
                self.send(reply)
                self._last_request = trio.current_time()  # the idle clock starts at the answer
                self._quiet_changed()

    # -- writing ------------------------------------------------------------------------------
    def send(self, message: Message) -> None:
        """Queue a reply; one that is over the frame limit becomes an error reply."""
        try:
            frame = encode_frame(message)
        except (msgspec.EncodeError, TypeError, ValueError) as e:
            logger.exception("a remote-session reply could not be encoded")
            message = ErrorReply(id=getattr(message, "id", None), code="internal_error",
                                 message=f"the reply could not be encoded: {e}")
            frame = encode_frame(message)
        if len(frame) - HEADER_SIZE > self._limits.max_frame_size:
            request_id = getattr(message, "id", None)
            self.send_error(request_id, "response_too_large",
                            f"the reply of {len(frame) - HEADER_SIZE} bytes exceeds the "
                            f"limit of {self._limits.max_frame_size} bytes")
            return
        if isinstance(message, ErrorReply):
            self._counters.errors_sent += 1
        else:
            self._counters.replies_sent += 1
        self._send(frame, reply=True)

    def send_error(self, request_id: int | None, code: str, message: str,
                   error_type: str | None = None) -> None:
        self.send(ErrorReply(id=request_id, code=code, message=message[:4096],
                             error_type=error_type))

    def send_event(self, name: str, frame: bytes) -> None:
        """Queue an encoded event frame if this connection subscribed to ``name``."""
        if not self.subscribed or (self.subscription is not None
                                   and name not in self.subscription):
            return
        if not self._send(frame, reply=False):
            self._counters.events_dropped += 1

    def _send(self, frame: bytes, *, reply: bool) -> bool:
        try:
            self._outbox.put(frame)
        except trio.WouldBlock:
            if reply:
                # the client is not reading its replies: waiting would pin the host's tasks
                logger.warning("closing a connection whose client does not read its replies")
                self._counters.connections_overflowed += 1
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
            self._requests_scope.cancel()  # the client is gone

