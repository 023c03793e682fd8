"""RemoteSession on LiveKit's protocol: the Trio client of ``AgentSessionMessage`` hosts —
LiveKit's own ``SessionHost`` and ours (:class:`agents_trio.remote.lk.SessionHost`).

Method names and answers are LiveKit's (``wait_for_ready``, ``run``, ``get_chat_history``,
``get_agent_info``, ``get_framework_info``, ``get_session_state``, ``get_session_usage``,
``update_io``, ``finalize_simulation``), each returning the ``SessionResponse`` part LiveKit's
client returns; :func:`~agents_trio.remote.lk.convert.decode_chat_items` turns the chat items
into ours. A response with ``error`` raises :class:`RemoteSessionError`; no answer within a call's
``timeout`` raises ``TimeoutError``. Cancelling a call forgets its request (LiveKit's
protocol has no cancel: the host still answers it, and the answer is dropped). Events arrive as
``AgentSessionEvent``s: ``remote.on("conversation_item_added", callback)`` as with LiveKit's
emitter, or ``async for ev in remote.events()``.

It works over any connected Trio stream, in both directions LiveKit's TCP transport has:
:func:`connect_remote_session` dials a host that listens (ours), :func:`accept_remote_session`
takes the connection of a host that dials out (LiveKit's ``SessionHost`` with a
``TcpSessionTransport``, as its console does). Limits: frames over ``max_frame_size`` end the
connection, at most ``max_pending_requests`` requests wait at once, and the events queue is
bounded (events that do not fit are dropped and counted in ``events_dropped``).
"""

from __future__ import annotations

import itertools
import logging

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from google.protobuf.message import Message

from ..errors import RemoteConnectionError, RemoteSessionClosedError, RemoteSessionError
from .codec import (LIVEKIT_MAX_FRAME_SIZE, LkFrameReader, WireError, encode_message, pb)

logger = logging.getLogger("agents_trio.remote")

EventCallback = Callable[[pb.AgentSessionEvent], object]

_ids = itertools.count(1)


def _request_id() -> str:
    return f"req_trio_{next(_ids)}"


class RemoteSession:
    """A client of a LiveKit-protocol host over ``stream``; use :func:`open_remote_session`
    (or its dial/accept variants), which run its receiver."""

    def __init__(self, stream: trio.abc.Stream, *,
                 max_frame_size: int = LIVEKIT_MAX_FRAME_SIZE, max_pending_requests: int = 64,
                 max_events: int = 1024) -> None:
        self._stream = stream
        self._reader = LkFrameReader(stream, max_frame_size=max_frame_size)
        self._max_pending = max_pending_requests
        self._pending: dict[str, _Waiter] = {}
        self._callbacks: dict[str, list[EventCallback]] = {}
        self._events_send, self._events_recv = \
            trio.open_memory_channel[pb.AgentSessionEvent](max_events)
        self._send_lock = trio.Lock()
        self._closed: str | None = None
        self.events_dropped = 0
        self.messages_received = 0

    # -- events
    def on(self, name: str, callback: EventCallback | None = None
           ) -> Callable[[EventCallback], EventCallback] | EventCallback:
        """Call ``callback(event)`` for each event named ``name`` (LiveKit's names, e.g.
        ``"agent_state_changed"``); usable as a decorator."""
        def register(cb: EventCallback) -> EventCallback:
            self._callbacks.setdefault(name, []).append(cb)
            return cb
        return register(callback) if callback is not None else register

    def off(self, name: str, callback: EventCallback) -> None:
        callbacks = self._callbacks.get(name, [])
        if callback in callbacks:
            callbacks.remove(callback)

    def events(self) -> trio.MemoryReceiveChannel[pb.AgentSessionEvent]:
        """Every event, in order, until the connection ends (one consumer)."""
        return self._events_recv

    # -- requests (LiveKit's names)
    async def wait_for_ready(self, timeout: float = 5.0, retry_interval: float = 0.5) -> None:
        """Ping until the host answers (LiveKit's host answers once it has a session; ours
        once the session runs an agent).

        Raises:
            TimeoutError: no pong within ``timeout``.

        Cancellation: cancelling it stops the pings; an answer still on its way is dropped and
        the connection stays usable.
        """
        last: RemoteSessionError | None = None
        with trio.move_on_after(timeout):
            while True:
                try:
                    with trio.move_on_after(retry_interval):
                        await self._request(ping=pb.SessionRequest.Ping())
                        return
                except (RemoteConnectionError, RemoteSessionClosedError):
                    raise
                except RemoteSessionError as e:
                    last = e  # e.g. our host: "not started an agent yet"
                    await trio.sleep(retry_interval)
        raise TimeoutError(f"wait_for_ready timed out after {timeout:g} s"
                           + (f" ({last.message})" if last is not None else ""))

    async def ping(self, timeout: float = 60.0) -> None:
        """Cancellation: cancelling it while the request is being written ends the connection (a
        half frame would corrupt it); while waiting for the answer, the answer is dropped and
        the connection stays usable.
        """
        await self._request(ping=pb.SessionRequest.Ping(), timeout=timeout)

    async def get_chat_history(self, timeout: float = 60.0
                               ) -> pb.SessionResponse.GetChatHistoryResponse:
        """Cancellation: as :meth:`ping`."""
        resp = await self._request(get_chat_history=pb.SessionRequest.GetChatHistory(),
                                   timeout=timeout)
        return resp.get_chat_history

    async def get_agent_info(self, timeout: float = 60.0
                             ) -> pb.SessionResponse.GetAgentInfoResponse:
        """Cancellation: as :meth:`ping`."""
        resp = await self._request(get_agent_info=pb.SessionRequest.GetAgentInfo(),
                                   timeout=timeout)
        return resp.get_agent_info

    async def get_framework_info(self, timeout: float = 60.0
                                 ) -> pb.SessionResponse.GetFrameworkInfoResponse:
        """Cancellation: as :meth:`ping`."""
        resp = await self._request(get_framework_info=pb.SessionRequest.GetFrameworkInfo(),
                                   timeout=timeout)
        return resp.get_framework_info

    async def get_session_state(self, timeout: float = 60.0
                                ) -> pb.SessionResponse.GetSessionStateResponse:
        """Cancellation: as :meth:`ping`."""
        resp = await self._request(get_session_state=pb.SessionRequest.GetSessionState(),
                                   timeout=timeout)
        return resp.get_session_state

    async def get_session_usage(self, timeout: float = 60.0
                                ) -> pb.SessionResponse.GetSessionUsageResponse:
        """Cancellation: as :meth:`ping`."""
        resp = await self._request(get_session_usage=pb.SessionRequest.GetSessionUsage(),
                                   timeout=timeout)
        return resp.get_session_usage

    async def run(self, text: str, timeout: float = 60.0
                  ) -> pb.SessionResponse.RunInputResponse:
        """One user turn (the host interrupts the agent first); the turn's chat items
        (:func:`~agents_trio.remote.lk.convert.decode_chat_items` makes them ours).

        Raises:
            RemoteSessionError: the turn failed (the host's ``error``).
            RemoteSessionClosedError: the connection ended first.
            TimeoutError: no answer within ``timeout`` (the request is forgotten; LiveKit's
                protocol has no cancel, so the host may still run the turn).
        """
        resp = await self._request(run_input=pb.SessionRequest.RunInput(text=text),
                                   timeout=timeout)
        return resp.run_input

    async def update_io(self, *, input_audio_enabled: bool | None = None,
                        input_video_enabled: bool | None = None,
                        output_audio_enabled: bool | None = None,
                        output_video_enabled: bool | None = None,
                        output_transcription_enabled: bool | None = None,
                        timeout: float = 60.0) -> pb.SessionResponse.UpdateIOResponse:
        """Switch the agent's I/O channels; only the ones given are sent.

        Cancellation: as :meth:`ping`; the host may still apply the update.
        """
        update = pb.SessionRequest.UpdateIO()
        for side, name, value in [("input", "audio_enabled", input_audio_enabled),
                                  ("input", "video_enabled", input_video_enabled),
                                  ("output", "audio_enabled", output_audio_enabled),
                                  ("output", "video_enabled", output_video_enabled),
                                  ("output", "transcription_enabled",
                                   output_transcription_enabled)]:
            if value is not None:
                setattr(getattr(update, side), name, value)
        resp = await self._request(update_io=update, timeout=timeout)
        return resp.update_io

    async def finalize_simulation(self, *, provisional_success: bool,
                                  provisional_reason: str = "", timeout: float = 60.0
                                  ) -> pb.SessionResponse.FinalizeSimulationResponse:
        """Hand the agent the simulator's provisional verdict; its own verdict comes back in
        ``user_verdict`` (unset when it has none).

        Cancellation: as :meth:`ping`; the host may still finalize.
        """
        resp = await self._request(
            finalize_simulation=pb.SessionRequest.FinalizeSimulation(
                provisional_success=provisional_success, provisional_reason=provisional_reason),
            timeout=timeout)
        return resp.finalize_simulation

    async def _request(self, *, timeout: float = 60.0,
                       **kind: Message) -> pb.SessionResponse:
        if self._closed is not None:
            raise RemoteSessionClosedError(f"the remote session is closed ({self._closed})",
                                           code="session_closed")
        if len(self._pending) >= self._max_pending:
            raise RemoteSessionError(f"too many pending requests (limit {self._max_pending})",
                                     code="too_many_requests")
        request = pb.SessionRequest(request_id=_request_id())
        for name, body in kind.items():
            getattr(request, name).CopyFrom(body)
        req_kind = request.WhichOneof("request")
        waiter = _Waiter()
        self._pending[request.request_id] = waiter
        # the timeout bounds the whole call, the send included (a host that stopped reading
        # would hold it there; a frame cut short ends the connection, see _send_whole)
        deadline = trio.current_time() + timeout
        try:
            frame = encode_message(pb.AgentSessionMessage(request=request))
            try:
                with trio.move_on_at(deadline) as sending:
                    async with self._send_lock:
                        await self._send_whole(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                raise RemoteConnectionError(f"the connection broke: {e}",
                                            code="connection_lost") from None
            if sending.cancelled_caught:
                raise TimeoutError(f"session request {req_kind} timed out after {timeout:g} s "
                                   "before the host took it")
            with trio.move_on_at(deadline):
                await waiter.done.wait()
            if not waiter.done.is_set():
                raise TimeoutError(f"session request {req_kind} timed out after {timeout:g} s")
        finally:
            self._pending.pop(request.request_id, None)
        if waiter.closed is not None:
            raise RemoteSessionClosedError(
                f"session request {req_kind} failed: the connection closed ({waiter.closed})",
                code="session_closed")
        response = waiter.response
        assert response is not None
        if response.error:
            raise RemoteSessionError(f"session request {req_kind} failed: {response.error}",
                                     code=req_kind or "internal_error")
        return response

    # -- receiving
    async def receive_loop(self) -> None:
        """Read until the connection ends; pending requests then fail.

        Cancellation: cancelling it ends the client as a closed connection would.
        """
        reason = "the host closed the connection"
        try:
            while True:
                try:
                    message = await self._reader.receive()
                except WireError as e:
                    reason = f"broken frame from the host: {e.message}"
                    logger.warning("LiveKit-protocol client: %s", reason)
                    return
                except (trio.BrokenResourceError, trio.ClosedResourceError) as e:
                    reason = f"the connection broke: {e}"
                    return
                if message is None:
                    return
                self.messages_received += 1
                self._take(message)
        finally:
            self._close(reason)

    def _take(self, message: pb.AgentSessionMessage) -> None:
        kind = message.WhichOneof("message")
        if kind == "response":
            waiter = self._pending.get(message.response.request_id)
            if waiter is not None and not waiter.done.is_set():
                waiter.response = message.response
                waiter.done.set()
            elif message.response.request_id == "" and message.response.error:
                logger.warning("the host says: %s", message.response.error)
        elif kind == "event":
            event = message.event
            name = event.WhichOneof("event")
            if name is None:
                return
            for cb in list(self._callbacks.get(name, [])):
                try:
                    cb(event)
                except Exception:  # a listener's bug must not end the connection
                    logger.exception("a remote-session event callback failed")
            try:
                self._events_send.send_nowait(event)
            except trio.WouldBlock:
                self.events_dropped += 1
            except trio.ClosedResourceError:
                pass

    async def _send_whole(self, frame: bytes) -> None:
        """Write one frame. A frame cut short by a cancellation would corrupt every frame
        after it, so the connection ends with it: later calls fail with
        :class:`RemoteSessionClosedError` instead of sending onto a broken stream."""
        try:
            await self._stream.send_all(frame)
        except trio.Cancelled:
            self._close("a request was cancelled while its frame was being sent")
            await trio.aclose_forcefully(self._stream)
            raise

    def _close(self, reason: str) -> None:
        if self._closed is None:
            self._closed = reason
        for waiter in self._pending.values():
            if not waiter.done.is_set():
                waiter.closed = reason
                waiter.done.set()
        self._events_send.close()

    async def aclose(self) -> None:
        """Cancellation: the close is immediate (forceful); a cancelled call still leaves the
        client closed.
        """
        self._close("closed by the client")
        await trio.aclose_forcefully(self._stream)


class _Waiter:
    __slots__ = ("closed", "done", "response")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.response: pb.SessionResponse | None = None
        self.closed: str | None = None


@asynccontextmanager
async def open_remote_session(stream: trio.abc.Stream,
                              **options: Any,  # noqa: ANN401 - RemoteSession's keywords, typed there
                              ) -> AsyncIterator[RemoteSession]:
    """``async with open_remote_session(stream) as remote:`` — a client over a connected
    stream, its receiver running until the block ends (which closes the stream).

    Cancellation: cancelling the block closes the stream; pending calls fail with
    :class:`RemoteSessionClosedError`.
    """
    remote = RemoteSession(stream, **options)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(remote.receive_loop)
        try:
            yield remote
        finally:
            await remote.aclose()
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def connect_remote_session(host: str, port: int,
                                 **options: Any,  # noqa: ANN401 - RemoteSession's keywords, typed there
                              ) -> AsyncIterator[RemoteSession]:
    """Dial a host that listens (``HOST:PORT``) and open a client on it.

    Raises:
        RemoteConnectionError: the host cannot be reached.

    Cancellation: as :func:`open_remote_session`; cancelling the dial leaves nothing open.
    """
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as e:
        raise RemoteConnectionError(f"cannot connect to {host}:{port}: {e}",
                                    code="connection_failed") from None
    async with open_remote_session(stream, **options) as remote:
        yield remote


@asynccontextmanager
async def accept_remote_session(listener: trio.abc.Listener[trio.SocketStream],
                                **options: Any,  # noqa: ANN401 - RemoteSession's keywords, typed there
                              ) -> AsyncIterator[RemoteSession]:
    """Wait for a host that dials out (LiveKit's ``SessionHost`` over a
    ``TcpSessionTransport``) on ``listener`` and open a client on its connection.

    Cancellation: as :func:`open_remote_session`; cancelling the wait accepts nothing.
    """
    stream = await listener.accept()
    async with open_remote_session(stream, **options) as remote:
        yield remote


__all__ = ["RemoteSession", "accept_remote_session", "connect_remote_session",
           "open_remote_session"]
