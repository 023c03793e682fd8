"""RemoteSession: the Trio client of a SessionHost.

    async with open_remote_session("127.0.0.1:8765") as remote:
        await remote.wait_for_ready()
        result = await remote.run("What's the weather in Lisbon?")   # a RunResult
        result.expect.next_event().is_message(role="assistant")

Requests are multiplexed on one connection, so several tasks may call at once. No call has a
timeout of its own: wrap it in ``trio.fail_after`` / ``move_on_after``. A request abandoned
that way is cancelled on the host too (for ``run``: a turn that had not started yet is
skipped; one already running finishes in the session, and its reply is dropped).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, overload

import trio

from ..chat import ChatContext, ChatItem
from .wire import (DEFAULT_MAX_FRAME_SIZE, HEADER_SIZE, AgentInfo, AgentInfoReply, Cancel,
                   ErrorReply, Event, FrameReader, FrameTooLargeError, GetAgentInfo,
                   GetChatHistory, GetSessionState, Goodbye, HistoryReply, ReadyReply, Reply,
                   ReplyMessage, Request, Run, RunReply, SessionStateInfo, SessionStateReply,
                   Subscribe, SubscribedReply, Unsubscribe, UnsubscribedReply, WaitForReady,
                   WireError, decode_reply, encode_frame, from_wire_item)
from ..nurseries import EventFanout, Subscription, open_unwrapping_nursery
from ..nurseries.fanout import CallbackT
from ..run_result import RunResult
from ._events import event_from_wire
from .errors import RemoteConnectionError, RemoteSessionError, error_from_code

logger = logging.getLogger("agents_trio.remote")

R = TypeVar("R", bound=Reply)


_HISTORY_WALKS = 3


@dataclass(frozen=True)
class ChatHistoryPage:
    """One page of a remote session's chat history (see
    :meth:`RemoteSession.get_chat_history_page`).

    Attributes:
        items: The items of history indices ``start`` to ``end`` (exclusive); an item the wire
            cannot carry is left out but counted.
        start, end: The indices covered (``start > 0``: earlier items exist).
        total: The length of the history when the host answered.
        more: Items after ``end`` exist (ask again with ``start=end``).
        truncated: Ids of the items sent with their text shortened, because one alone did not
            fit a reply frame (its text ends with a ``[... truncated: ...]`` note).
    """

    items: list[ChatItem]
    start: int
    end: int
    total: int
    more: bool
    truncated: tuple[str, ...] = ()


@dataclass(frozen=True)
class RemoteSessionStatistics:
    """Requests waiting for a reply, events received, and whether the connection ended."""

    pending_requests: int
    events_received: int
    closed: bool


def parse_address(address: str) -> tuple[str, int] | str:
    """``"HOST:PORT"`` (``"[::1]:PORT"`` for IPv6) → ``(host, port)``; ``"unix:PATH"`` → path.

    Raises:
        ValueError: neither form.
    """
    if address.startswith("unix:"):
        return address[len("unix:"):]
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT or unix:PATH, got {address!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


async def connect_stream(address: str, *, retry_interval: float | None = None
                         ) -> trio.abc.Stream:
    """Open a stream to a host at ``address`` (see :func:`parse_address`).

    Args:
        retry_interval: When given, a refused connection is retried after this many seconds
            until it succeeds; bound the wait with a cancel scope.

    Raises:
        RemoteConnectionError: the connection failed (and no retry was asked for).
    """
    target = parse_address(address)
    while True:
        try:
            if isinstance(target, str):
                return await trio.open_unix_socket(target)
            return await trio.open_tcp_stream(*target)
        except OSError as e:
            if retry_interval is None:
                raise RemoteConnectionError(f"could not connect to {address}: {e}",
                                            code="connection_failed") from e
        await trio.sleep(retry_interval)


class _Slot:
    __slots__ = ("done", "error", "reply")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: Any = None
        self.error: RemoteSessionError | None = None


class RemoteSession:
    """A connection to a SessionHost; build it with :func:`open_remote_session` or
    :func:`connect_remote_session`.

    The events of a subscription (:meth:`subscribe`) are delivered like a session's:
    ``remote.on(name, callback)``, ``remote.off``, ``async for ev in remote.events():``, as
    the same event classes (errors become ``RemoteSessionError``, speech handles their id).

    Args:
        stream: A connected stream to the host.
        max_frame_size: Largest payload accepted from (and sent to) the host.
    """

    def __init__(self, stream: trio.abc.Stream, *,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._stream = stream
        self._max_frame_size = max_frame_size
        self._ids = itertools.count(1)
        self._pending: dict[int, _Slot] = {}
        self._outbox_send, self._outbox_recv = trio.open_memory_channel[bytes](64)
        self._fanout = EventFanout()
        self._events_received = 0
        self._end_reason: tuple[str, str] | None = None
        self._scope: trio.CancelScope | None = None
        self._started = False
        self._done = trio.Event()

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether the connection ended (or the host said goodbye); every call then raises."""
        return self._end_reason is not None or self._done.is_set()

    def statistics(self) -> RemoteSessionStatistics:
        return RemoteSessionStatistics(pending_requests=len(self._pending),
                                       events_received=self._events_received,
                                       closed=self.closed)

    async def serve(self, *, task_status: trio.TaskStatus[RemoteSession] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Read and write the connection until it ends; for ``nursery.start``.

        Cancellation: cancelling it closes the connection; pending calls then raise
        ``RemoteConnectionError``.
        """
        if self._started:
            raise RuntimeError("a RemoteSession serves once")
        self._started = True
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._write_loop)
                task_status.started(self)
                await self._read_loop()
                nursery.cancel_scope.cancel()
        finally:
            self._end("the remote session was closed", "client_closed")
            await trio.aclose_forcefully(self._stream)
            self._done.set()

    async def aclose(self) -> None:
        """Close the connection; pending calls raise ``RemoteConnectionError``.

        Cancellation: idempotent; the connection is closed even if the wait is cancelled.
        """
        if not self._started:
            self._started = True
            self._end("the remote session was closed", "client_closed")
            await trio.aclose_forcefully(self._stream)
            self._done.set()
            return
        self._set_end_reason("the remote session was closed", "client_closed")
        if self._scope is not None:
            self._scope.cancel()
        await self._done.wait()

    def _set_end_reason(self, message: str, code: str) -> None:
        if self._end_reason is None:
            self._end_reason = (message, code)

    def _end_error(self) -> RemoteSessionError:
        assert self._end_reason is not None
        message, code = self._end_reason
        return error_from_code(message, code, connection=True)

    def _end(self, message: str, code: str) -> None:
        self._set_end_reason(message, code)
        pending, self._pending = self._pending, {}
        for slot in pending.values():
            slot.error = self._end_error()
            slot.done.set()
        self._outbox_recv.close()
        self._fanout.close()

    # -- the connection -----------------------------------------------------------------------
    async def _read_loop(self) -> None:
        reader = FrameReader(self._stream, max_frame_size=self._max_frame_size)
        while True:
            try:
                payload = await reader.receive()
            except WireError as e:
                self._set_end_reason(f"bad frame from the host: {e}", e.code)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                self._set_end_reason(f"the connection to the host broke ({e})",
                                     "connection_closed")
                return
            if payload is None:
                self._set_end_reason("the host closed the connection", "connection_closed")
                return
            try:
                message = decode_reply(payload)
            except WireError as e:
                logger.warning("undecodable message from the host: %s", e)
                self._fail(e.request_id, error_from_code(str(e), e.code))
                continue
            self._dispatch(message)

    def _dispatch(self, message: ReplyMessage) -> None:
        if isinstance(message, Event):
            self._events_received += 1
            name, event = event_from_wire(message.event)
            self._fanout.emit(name, event)
        elif isinstance(message, Goodbye):
            self._set_end_reason(message.message, message.code)
        elif isinstance(message, ErrorReply):
            if message.id is None:
                logger.warning("the host reported an error: %s (%s)", message.message,
                               message.code)
            self._fail(message.id, error_from_code(message.message, message.code,
                                                   message.error_type))
        else:
            slot = self._pending.pop(message.id, None)
            if slot is not None:
                slot.reply = message
                slot.done.set()

    def _fail(self, request_id: int | None, error: RemoteSessionError) -> None:
        slot = self._pending.pop(request_id, None) if request_id is not None else None
        if slot is not None:
            slot.error = error
            slot.done.set()

    async def _write_loop(self) -> None:
        try:
            async for frame in self._outbox_recv:
                await self._stream.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
            self._set_end_reason(f"the connection to the host broke ({e})", "connection_closed")
            if self._scope is not None:
                self._scope.cancel()

    async def _request(self, make: Callable[[int], Request], expected: type[R]) -> R:
        if self._end_reason is not None or not self._started:
            raise (self._end_error() if self._end_reason is not None
                   else RuntimeError("the RemoteSession is not connected (serve() not started)"))
        request_id = next(self._ids)
        frame = encode_frame(make(request_id))
        if len(frame) - HEADER_SIZE > self._max_frame_size:
            raise FrameTooLargeError(f"the request of {len(frame) - HEADER_SIZE} bytes exceeds "
                                     f"the limit of {self._max_frame_size} bytes")
        slot = _Slot()
        self._pending[request_id] = slot
        try:
            try:
                await self._outbox_send.send(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise self._end_error() from None
            await slot.done.wait()
        finally:
            if self._pending.pop(request_id, None) is not None:
                # given up (cancelled): tell the host to drop it
                try:
                    self._outbox_send.send_nowait(encode_frame(Cancel(id=request_id)))
                except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
        if slot.error is not None:
            raise slot.error
        if not isinstance(slot.reply, expected):
            raise RemoteSessionError(f"unexpected reply {slot.reply.kind!r} from the host",
                                     code="internal_error")
        return slot.reply

    # -- requests -----------------------------------------------------------------------------
    async def wait_for_ready(self) -> str:
        """Wait until the session runs an agent; returns the agent's id.

        Raises:
            RemoteSessionClosedError: the session closed first.

        Cancellation: safe; the host forgets the request.
        """
        reply = await self._request(lambda i: WaitForReady(id=i), ReadyReply)
        return reply.agent_id

    async def run(self, text: str) -> RunResult[None]:
        """Send ``text`` as a user turn and wait until the turn settled.

        Turns of all clients run one at a time, in arrival order; typing while the agent
        speaks interrupts it (unless the speech does not allow interruptions).

        Returns:
            A done ``RunResult`` with the turn's events (assistant messages, tool calls and
            outputs, handoffs — handoff events carry no agent objects remotely). A turn that
            produces nothing has no events.

        Raises:
            RemoteSessionError: the turn failed (``code="run_failed"``; ``message`` is the
                model's error), or the request was refused (``not_ready``, ``bad_request``).
            RemoteSessionClosedError: the session closed during the turn.

        Cancellation: the request is withdrawn on the host too; a turn that had not started
        is skipped, one already running finishes in the session and its reply is dropped.
        """
        reply = await self._request(lambda i: Run(id=i, text=text), RunReply)
        result: RunResult[None] = RunResult(user_input=text)
        for item in reply.items:
            result._record_item(from_wire_item(item))
        result._check_done()
        return result

    async def get_chat_history(self) -> ChatContext:
        """The session's whole chat history, fetched a page at a time (each page fits a reply
        frame, however long the history is).

        When the history changes during the walk (a turn adds items), the walk starts over, up
        to three times; the last walk is returned, without duplicate items. An item too large
        for one reply comes with its text shortened (see :meth:`get_chat_history_page` to
        tell which).

        Cancellation: safe; the host forgets the request in flight.
        """
        items: list[ChatItem] = []
        for _ in range(_HISTORY_WALKS):
            items, steady = await self._walk_history()
            if steady:
                break
        return ChatContext(items)

    async def _walk_history(self) -> tuple[list[ChatItem], bool]:
        """Every page from the first; ``steady``: the history's length did not change."""
        items: dict[str, ChatItem] = {}
        page = await self.get_chat_history_page(start=0)
        first_total = page.total
        while True:
            for item in page.items:
                items.setdefault(item.id, item)
            if not page.more or page.total != first_total:
                break
            page = await self.get_chat_history_page(start=page.end)
        return list(items.values()), page.total == first_total and not page.more

    async def get_chat_history_page(self, start: int | None = None, limit: int | None = None
                                    ) -> ChatHistoryPage:
        """One page of the session's chat history.

        Args:
            start: Index of the first item (0 is the oldest). None: the most recent items
                that fit one reply.
            limit: At most this many items (None: as many as fit one reply).

        Raises:
            ValueError: ``start`` or ``limit`` is negative.

        Cancellation: safe; the host forgets the request.
        """
        for name, value in (("start", start), ("limit", limit)):
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        reply = await self._request(lambda i: GetChatHistory(id=i, start=start, limit=limit),
                                    HistoryReply)
        items = [from_wire_item(item) for item in reply.items]
        if reply.end is None:  # a host of before paging sends the whole history
            return ChatHistoryPage(items=items, start=0, end=len(items), total=len(items),
                                   more=False)
        return ChatHistoryPage(items=items, start=reply.start, end=reply.end,
                               total=reply.total if reply.total is not None else reply.end,
                               more=reply.more, truncated=tuple(reply.truncated))

    async def get_agent_info(self) -> AgentInfo:
        """The current agent: id, class name, instructions, tools.

        Cancellation: the request is withdrawn (the host is told to drop it); the
        connection stays open.
        """
        reply = await self._request(lambda i: GetAgentInfo(id=i), AgentInfoReply)
        return reply.agent

    async def get_session_state(self) -> SessionStateInfo:
        """Agent and user state, current agent and speech.

        Cancellation: the request is withdrawn (the host is told to drop it); the
        connection stays open.
        """
        reply = await self._request(lambda i: GetSessionState(id=i), SessionStateReply)
        return reply.state

    async def subscribe(self, events: Iterable[str] | None = None) -> None:
        """Ask the host to stream session events (all, or those named); replaces an earlier
        subscription's filter.

        Cancellation: the request is withdrawn (the host is told to drop it); the
        connection stays open.
        """
        names = None if events is None else sorted(set(events))
        await self._request(lambda i: Subscribe(id=i, events=names), SubscribedReply)

    async def unsubscribe(self) -> None:
        """Ask the host to stop streaming session events.

        Cancellation: the request is withdrawn (the host is told to drop it); the
        connection stays open.
        """
        await self._request(lambda i: Unsubscribe(id=i), UnsubscribedReply)

    # -- events -------------------------------------------------------------------------------
    @overload
    def on(self, name: str, callback: CallbackT) -> CallbackT: ...

    @overload
    def on(self, name: str, callback: None = None) -> Callable[[CallbackT], CallbackT]: ...

    def on(self, name: str, callback: CallbackT | None = None
           ) -> CallbackT | Callable[[CallbackT], CallbackT]:
        """Register a plain function for a streamed event; usable as a decorator."""
        return self._fanout.on(name, callback) if callback else self._fanout.on(name)

    def off(self, name: str, callback: Callable[[Any], Any]) -> None:
        self._fanout.off(name, callback)

    def events(self) -> _Events:
        """``async for ev in remote.events():`` yields streamed events until the connection
        ends (call :meth:`subscribe` for the host to send any)."""
        return _Events(self._fanout.subscribe())


class _Events:
    def __init__(self, subscription: Subscription) -> None:
        self._sub = subscription

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> object:
        return (await self._sub.__anext__()).event

    async def aclose(self) -> None:
        await self._sub.aclose()

    async def __aenter__(self) -> _Events:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def connect_remote_session(nursery: trio.Nursery, target: str | trio.abc.Stream, *,
                                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                                 retry_interval: float | None = None) -> RemoteSession:
    """Connect to a host and serve the connection in ``nursery`` (which then owns it).

    Args:
        target: ``"HOST:PORT"``, ``"unix:PATH"``, or a connected ``trio.abc.Stream``.
        retry_interval: Retry a refused connection at this interval (see
            :func:`connect_stream`).

    Raises:
        RemoteConnectionError: the connection failed.

    Cancellation: cancelling the connect (or the retries) leaves nothing behind; once it
    returned, the connection is served in ``nursery`` until :meth:`RemoteSession.aclose` or
    the nursery's cancellation, which closes it at once.
    """
    stream = (target if isinstance(target, trio.abc.Stream)
              else await connect_stream(target, retry_interval=retry_interval))
    remote = RemoteSession(stream, max_frame_size=max_frame_size)
    return await nursery.start(remote.serve)  # type: ignore[no-any-return]


@asynccontextmanager
async def open_remote_session(target: str | trio.abc.Stream, *,
                              max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                              retry_interval: float | None = None
                              ) -> AsyncIterator[RemoteSession]:
    """``async with open_remote_session("127.0.0.1:8765") as remote:`` — a connection that
    owns its nursery; leaving the block closes it. Arguments as
    :func:`connect_remote_session`. An exception of the body escapes as itself, not in an
    ``ExceptionGroup``.

    Cancellation: cancelling the block closes the connection (``aclose``, then the nursery's
    tasks are cancelled); requests in flight are withdrawn.
    """
    async with open_unwrapping_nursery() as nursery:
        remote = await connect_remote_session(nursery, target, max_frame_size=max_frame_size,
                                              retry_interval=retry_interval)
        try:
            yield remote
        finally:
            await remote.aclose()
