"""Running an agent in a LiveKit room: the job context an entrypoint receives, and the runner.

An entrypoint is a Trio async function taking a :class:`JobContext`, written as in LiveKit::

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(stt=deepgram.STT(), llm=openai.LLM(), ...)  # adapted there
        await session.start(Assistant(), room=ctx.room)   # the job owns the session

or, the session's lifetime spelled out, ``await ctx.run_session(session, Assistant())``
(returns when the session closed).

:func:`run_job` opens the asyncio bridge, connects to the room, calls the entrypoint and
disconnects when it returns. ``python -m agents_trio connect`` runs it from the command line;
``agents_trio.worker`` runs it for every job LiveKit dispatches.

The job owns the room, so it owns the room's end: the connection is watched from the moment
it opens, and a disconnect shuts the job down (:meth:`JobContext.shutdown` with reason
``job_shutdown``): a running session closes, :meth:`JobContext.wait_for_participant` raises
:class:`~agents_trio.io.room.RoomDisconnectedError`, a later :meth:`JobContext.run_session`
returns at once, and an entrypoint that goes on is cancelled after the grace. Cancelling the
job (LiveKit ending it) is a shutdown too: sessions close with ``job_shutdown``, not as if
the user closed them.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import functools
import importlib
import importlib.util
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import trio
from livekit import rtc

from .io.bridge import AsyncioBridge, open_bridge
from .io.plugin_http import PluginHttpSession
from .io.server_api import BridgedLiveKitAPI, ServerAPI, open_server_api
from .io.room import (RoomConnectError, RoomDisconnectedError, RoomIO, RoomOptions, mint_token,
                      open_room, open_room_io)

from .events import CloseEvent, CloseReason
from .job_process import JobProcess, ShutdownCallback, ShutdownCallbacks
from .livekit_job import InferenceExecutor, open_livekit_job_context
from .nurseries import open_unwrapping_nursery
from .server_requests import ServerRequest, ServerRequestCancelled
from .session import SessionState, owning_sessions

if TYPE_CHECKING:
    from .agent import Agent
    from .run_result import RunResult
    from .session import AgentSession

__all__ = ["AutoSubscribe", "JobContext", "JobProcess", "get_current_job_context", "get_job_context",
           "load_entrypoint", "open_plugin_http_context", "run_job"]

logger = logging.getLogger("agents_trio.job")

R = TypeVar("R")
T = TypeVar("T")
Entrypoint = Callable[["JobContext"], Awaitable[Any]]
RoomOpener = Callable[..., AbstractAsyncContextManager[Any]]


class AutoSubscribe(str, enum.Enum):
    """LiveKit's ``AutoSubscribe``: which tracks ``ctx.connect(auto_subscribe=...)`` subscribes
    to. The job's room is connected subscribing to every track, so only ``SUBSCRIBE_ALL``
    is accepted there."""

    SUBSCRIBE_ALL = "subscribe_all"
    SUBSCRIBE_NONE = "subscribe_none"
    AUDIO_ONLY = "audio_only"
    VIDEO_ONLY = "video_only"


class JobContext:
    """What an entrypoint gets: the bridge, the connected room, its process, and the sessions
    it starts.

    A session started the LiveKit way, ``await session.start(agent, room=ctx.room)`` without
    ``async with``, is owned by the job: it runs in the job's nursery, linked to the room,
    until it closes or the job shuts down. The entrypoint may return meanwhile; the job ends
    once the entrypoint returned and every session it owns closed. Then the room disconnects
    and the shutdown callbacks run.

    Attributes:
        bridge: The asyncio bridge the room and the plugins run on.
        room: The connected ``rtc.Room``.
        proc: The process (``proc.userdata`` holds what the server's prewarm loaded).
        job_id: The dispatched job's id (``None`` when run by ``connect``).
        url: The LiveKit server's URL the room is connected to (``None`` when not known).
        on_session_end: Awaited with this context once the entrypoint returned and its
            sessions closed, before the shutdown callbacks (LiveKit's ``on_session_end``).
        session_end_timeout: Seconds ``on_session_end`` may take before it is cancelled
            (LiveKit's server option of that name; 300 by default, as there).
    """

    def __init__(self, bridge: AsyncioBridge, room: rtc.Room, *, job_id: str | None = None,
                 shutdown_grace: float = 10.0, proc: JobProcess | None = None,
                 url: str | None = None) -> None:
        self.bridge = bridge
        self.url = url
        self.room = room
        self.proc = proc if proc is not None else JobProcess()
        self.job_id = job_id
        self.shutdown_grace = shutdown_grace
        self.shutdown_reason: CloseReason | None = None
        self.on_session_end: Callable[[JobContext], Awaitable[object]] | None = None
        self.session_end_timeout = 300.0
        # the sessions the job links and runs, each with its run (one run per session)
        self._sessions: dict[AgentSession, _SessionRun] = {}
        self._last_close_reason: str | None = None
        self._shutdown_text: str | None = None
        self._shutdown_callbacks = ShutdownCallbacks()
        # the sessions started without `async with` (open while the entrypoint runs)
        self._owned: trio.Nursery | None = None
        # the entrypoint's scope: shielded from the job's caller, whose cancellation becomes
        # a shutdown; its own deadline (set by shutdown) still ends it
        self._scope = trio.CancelScope(shield=True)
        self._room_gone = trio.Event()
        self._room_ios: list[RoomIO] = []
        #: LiveKit's inference executor for plugins (see agents_trio.livekit_job): the
        #: packed worker's job gives its own; otherwise one is started for the entrypoint
        #: when LiveKit inference runners are registered. asyncio: call it on the bridge.
        self.inference_executor: InferenceExecutor | None = None
        # the server calls made for the job (delete_room, SIP): the job waits for them
        self._requests: trio.Nursery | None = None

    def add_shutdown_callback(self, callback: ShutdownCallback) -> None:
        """Call ``callback`` when the job ends: after the entrypoint returned and its sessions
        closed, once the room disconnected. A callback taking one argument gets the reason
        (``job_shutdown`` or the reason given to :meth:`shutdown`; when nothing shut the job
        down, the close reason of its last session, or ``"entrypoint returned"``). Sync or
        async; all run at once, within ``shutdown_grace``; a failing one is logged. One added
        by a running callback joins them at once.

        Raises:
            TypeError: ``callback`` is not callable.
            RuntimeError: The shutdown callbacks already ran.
        """
        self._shutdown_callbacks.add(callback)

    async def connect(self, *, encryption: object = None,
                      auto_subscribe: str = "subscribe_all",
                      rtc_config: object = None, single_peer_connection: bool | None = None,
                      e2ee: object = None) -> None:
        """LiveKit's ``ctx.connect()``: here the room is connected before the entrypoint runs,
        so this returns at once (any number of times, before or after ``session.start``).

        Raises:
            ValueError: Options the connection already made cannot honour
                (``encryption``/``e2ee``, or ``auto_subscribe`` other than
                ``"subscribe_all"``).
            RoomDisconnectedError: The room is gone.

        Cancellation: a checkpoint only; nothing to undo.
        """
        if encryption is not None or e2ee is not None:
            raise ValueError("end-to-end encryption is not supported: the job's room is "
                             "connected without it")
        if str(getattr(auto_subscribe, "value", auto_subscribe)) != AutoSubscribe.SUBSCRIBE_ALL:
            raise ValueError(f"auto_subscribe={auto_subscribe!r} is not supported: the job's "
                             f"room subscribes to every track")
        await trio.lowlevel.checkpoint()
        if self._room_gone.is_set():
            raise RoomDisconnectedError("the room disconnected")

    def is_fake_job(self) -> bool:
        """Whether the job has no LiveKit server behind it (the console): its server calls
        are then skipped with a warning, as in LiveKit's console."""
        return self.url is None

    @functools.cached_property
    def api(self) -> BridgedLiveKitAPI:
        """LiveKit's server API for the job (LiveKit's ``ctx.api``, livekit-api's
        ``LiveKitAPI``) called from Trio: ``await ctx.api.room.delete_room(
        api.DeleteRoomRequest(room=ctx.room.name))``; each call runs on the bridge. The server
        is the job's (else ``LIVEKIT_URL``); key and secret come from ``LIVEKIT_API_KEY`` and
        ``LIVEKIT_API_SECRET``. Unlike :meth:`delete_room`, the calls also run in the console.

        Raises:
            ValueError: No server URL is known (as livekit-api's ``url must be set``).
        """
        url = self.url or os.environ.get("LIVEKIT_URL")
        if not url:
            raise ValueError("url must be set")
        return BridgedLiveKitAPI(url, self.bridge)

    def delete_room(self, room_name: str | None = None) -> ServerRequest[None]:
        """Delete the room (the job's by default), disconnecting everyone in it (LiveKit's
        ``ctx.delete_room()``). The request runs in the job, which waits for it before it
        ends; await the returned request to wait for it too. A room already gone is no
        error; other failures are logged, not raised (as in LiveKit).

        Asked for in a shutdown callback, the request runs when it is awaited.
        """
        name = room_name or self.room.name

        async def call(api: ServerAPI) -> None:
            try:
                await api.delete_room(name)
            except Exception as e:
                if getattr(e, "code", None) != "not_found":  # livekit-api's TwirpError
                    logger.warning("deleting room %s failed: %r", name, e)

        return self._server_request("delete_room", call)

    def add_sip_participant(self, *, call_to: str, trunk_id: str, participant_identity: str,
                            participant_name: str = "SIP-participant") -> ServerRequest[Any]:
        """Dial ``call_to`` (a number, ``+15105550123``, or ``sip:user@host``) into the job's
        room through the outbound SIP trunk ``trunk_id`` (LiveKit's
        ``ctx.add_sip_participant()``); await the request for the ``SIPParticipantInfo``.
        """
        async def call(api: ServerAPI) -> Any:  # noqa: ANN401 - livekit-api's reply
            return await api.create_sip_participant(
                sip_call_to=call_to, room_name=self.room.name, sip_trunk_id=trunk_id,
                participant_identity=participant_identity, participant_name=participant_name)

        return self._server_request("add_sip_participant", call)

    def transfer_sip_participant(self, participant: rtc.RemoteParticipant | str,
                                 transfer_to: str, play_dialtone: bool = False
                                 ) -> ServerRequest[Any]:
        """Transfer a SIP participant's call to ``transfer_to`` (a number or a SIP address;
        LiveKit's ``ctx.transfer_sip_participant()``: a cold transfer, the trunk must allow
        it).

        Raises:
            ValueError: ``participant`` is a participant that did not join by SIP.
        """
        if isinstance(participant, str):
            identity = participant
        else:
            if participant.kind != rtc.ParticipantKind.PARTICIPANT_KIND_SIP:
                raise ValueError(f"{participant.identity!r} is not a SIP participant")
            identity = participant.identity

        async def call(api: ServerAPI) -> Any:  # noqa: ANN401 - livekit-api's reply
            return await api.transfer_sip_participant(
                room_name=self.room.name, participant_identity=identity,
                transfer_to=transfer_to, play_dialtone=play_dialtone)

        return self._server_request("transfer_sip_participant", call)

    def _server_request(self, name: str, call: Callable[[ServerAPI], Awaitable[T]]
                        ) -> ServerRequest[T]:
        request: ServerRequest[T] = ServerRequest(name)
        if self.is_fake_job():
            logger.warning("job_ctx.%s() is not executed in console mode", name)
            request.set_result(None)  # type: ignore[arg-type]
            return request
        if self._requests is None:
            # after the job's run (a shutdown callback): the awaiter runs it
            request.run_when_awaited(lambda: self._run_request(request, call))
        else:
            self._requests.start_soon(self._run_request, request, call)
        return request

    async def _run_request(self, request: ServerRequest[T],
                           call: Callable[[ServerAPI], Awaitable[T]]) -> None:
        assert self.url is not None
        try:
            async with open_server_api(self.url, bridge=self.bridge) as api:
                request.set_result(await call(api))
        except Exception as e:
            logger.warning("job_ctx.%s() failed: %r", request.name, e)
            request.set_error(e)
        finally:
            request.set_error(ServerRequestCancelled(
                f"job_ctx.{request.name}() was cancelled: the job ended first"))

    async def start_session(self, session: AgentSession, agent: Agent, *,
                            room: rtc.Room | None = None,
                            room_options: RoomOptions | None = None,
                            capture_run: bool = False) -> RunResult[Any] | None:
        """Run ``session`` with ``agent`` in the job, linked to ``room`` if given; return once
        it started (what ``session.start(agent, room=...)`` does in a job). With
        ``capture_run``, return the run of the start (its first turn: what ``on_enter`` said
        and did), as ``session.start(capture_run=True)``; else, or when the job is already
        shutting down, None.

        A session not yet entered is entered and owned by the job: it runs until it closes or
        the job shuts down, and the job waits for it. A session inside ``async with`` stays
        owned by its block; the job only keeps the room linked until it closes. When the job
        is already shutting down the session is not started.

        Raises:
            RuntimeError: The entrypoint is not running (the job has ended or not begun).

        A room gone while linking does not raise: it shuts the job down.

        Cancellation: cancelling it before the session started closes the session.
        """
        if self._owned is None:
            raise RuntimeError("this job's entrypoint is not running: it cannot own a session")
        run: RunResult[Any] | None = await self._owned.start(
            functools.partial(self._run_linked, capture_run=capture_run),
            session, agent, room, room_options)
        return run

    async def run_session(self, session: AgentSession, agent: Agent, *,
                          room_options: RoomOptions | None = None) -> str | None:
        """Use the room as ``session``'s I/O, start ``agent``, and return when the session
        closed (the linked participant left, the room dropped, the agent or a tool shut it
        down, or :meth:`shutdown`).

        Returns:
            The session's close reason; the shutdown's reason, without starting the
            session, when the job is already shutting down (e.g. the room is gone).

        Cancellation:
            Cancelling the caller closes the session (its ``on_exit`` hooks run) and unlinks
            the room.
        """
        return await self._run_linked(session, agent, self.room, room_options)

    async def _run_linked(self, session: AgentSession, agent: Agent, room: rtc.Room | None,
                          room_options: RoomOptions | None, *, capture_run: bool = False,
                          task_status: trio.TaskStatus[RunResult[Any] | None]
                          = trio.TASK_STATUS_IGNORED) -> str | None:
        """Link ``room``, enter ``session`` unless its block did, start ``agent``, report the
        start (with the run of the start when ``capture_run``), and return the close reason
        once the session closed."""
        if self.shutdown_reason is not None:
            task_status.started()
            return self.shutdown_reason
        running = self._sessions.get(session)
        if running is not None:
            # the job runs it already (a second start while the first goes on): as LiveKit's
            # start under its lock, this one waits for the first start and reports None
            await running.started.wait()
            task_status.started(None)
            return await running.reason()
        closed = _CloseWatch(session)
        try:
            async with AsyncExitStack() as stack:
                running = stack.enter_context(self._running(session))
                try:
                    await stack.enter_async_context(
                        self._open_session_io(session, room, room_options))
                except RoomDisconnectedError:
                    self._on_room_disconnected("seen when linking the session")
                    task_status.started()
                    return self.shutdown_reason
                if session.state is SessionState.CREATED:
                    await stack.enter_async_context(session)
                if self.shutdown_reason is not None:
                    task_status.started()
                    return self.shutdown_reason
                run = await session.start(agent, capture_run=capture_run)
                await stack.enter_async_context(self._serve_session(session, room))
                running.started.set()
                task_status.started(run)
                del task_status  # not kept: it holds start()'s temporary nursery
                reason = running.closed_with = await closed.wait()
                self._last_close_reason = reason
                return reason
        finally:
            closed.detach()

    @contextlib.contextmanager
    def _running(self, session: AgentSession) -> Iterator[_SessionRun]:
        """``session``'s run in the job, for the block: what a second start of it waits
        for."""
        running = self._sessions[session] = _SessionRun(self)
        try:
            yield running
        finally:
            del self._sessions[session]
            running.end()

    def _open_session_io(self, session: AgentSession, room: rtc.Room | None,
                         room_options: RoomOptions | None) -> AbstractAsyncContextManager[object]:
        """The session's I/O for the block: the room's (a job in a room)."""
        if room is None:
            return _nothing()
        return self._linked_room_io(session, room, room_options)

    @asynccontextmanager
    async def _linked_room_io(self, session: AgentSession, room: rtc.Room,
                              room_options: RoomOptions | None) -> AsyncIterator[RoomIO]:
        async with open_room_io(room, session, options=room_options,
                                bridge=self.bridge) as room_io:
            self._room_ios.append(room_io)
            try:
                yield room_io
            finally:
                if room_options is not None and room_options.delete_room_on_close:
                    logger.info("deleting room %s on agent session close (disable via "
                                "`RoomOptions.delete_room_on_close=False`)", room.name)
                    self.delete_room(room.name)

    def _serve_session(self, session: AgentSession, room: rtc.Room | None
                       ) -> AbstractAsyncContextManager[object]:
        """While the started session runs: served on the room (see ``_reachable_on_room``)."""
        if room is None:
            return _nothing()
        return self._reachable_on_room(session, room)

    @asynccontextmanager
    async def _reachable_on_room(self, session: AgentSession, room: rtc.Room
                                 ) -> AsyncIterator[None]:
        """As LiveKit's ``AgentSession`` in a room: while the block runs, ``session`` is served
        on the room's ``lk.agent.session`` byte streams, so LiveKit's simulation tooling and
        remote clients (``RemoteSession.from_room``) reach it. A room without byte streams
        (a test double) is left as it is."""
        if not callable(getattr(room, "register_byte_stream_handler", None)):
            yield
            return
        from .remote.lk.room import host_session_on_room

        async with trio.open_nursery() as nursery:
            await nursery.start(host_session_on_room, session, room, self.bridge)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()

    async def wait_for_participant(self) -> rtc.RemoteParticipant:
        """The first remote participant in the room (waiting for one to join).

        Raises:
            RoomDisconnectedError: The room disconnected before anyone joined.

        Cancellation: cancelling the wait leaves nothing behind.
        """
        push, joined = self.bridge.callback_channel()
        self.room.on("participant_connected", push)
        try:
            if not self._room_gone.is_set() and self.room.isconnected():
                for participant in self.room.remote_participants.values():
                    return participant
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_cancel_when_set, self._room_gone, nursery.cancel_scope)
                    participant = await joined.receive()
                    nursery.cancel_scope.cancel()
                    return participant  # type: ignore[no-any-return]
            raise RoomDisconnectedError("the room disconnected before a participant joined")
        finally:
            self.room.off("participant_connected", push)
            joined.close()

    def shutdown(self, reason: CloseReason | str = CloseReason.JOB_SHUTDOWN) -> None:
        """End the job: running sessions close with ``reason`` and, after
        ``shutdown_grace`` seconds, the entrypoint is cancelled. Sync; idempotent.

        ``reason`` is a :class:`CloseReason` or, as in LiveKit, any text: the sessions then
        close with ``job_shutdown`` and the shutdown callbacks get the text.
        """
        if self.shutdown_reason is not None:
            return
        close_reason = (CloseReason(reason) if reason in {r.value for r in CloseReason}
                        else CloseReason.JOB_SHUTDOWN)
        self.shutdown_reason = close_reason
        self._shutdown_text = str(reason)
        for session in list(self._sessions):
            session.shutdown(drain=False, reason=close_reason)
        self._scope.deadline = min(self._scope.deadline,
                                   trio.current_time() + self.shutdown_grace)

    async def run_entrypoint(self, entrypoint: Callable[[JobContext], Awaitable[R]], *,
                             on_ready: Callable[[JobContext], object] | None = None
                             ) -> R | None:
        """Run ``entrypoint(self)`` as this job: what :func:`run_job` does once connected.

        The room's connection is watched from before the entrypoint runs: its end shuts the
        job down (reason ``job_shutdown``). The call returns once the entrypoint returned and
        the sessions it started without ``async with`` closed, and ``on_session_end`` ran.

        Args:
            entrypoint: A Trio async function taking this context.
            on_ready: Called with this context just before the entrypoint runs.

        Returns:
            What the entrypoint returned (None if it was cancelled after the grace).

        Raises:
            Whatever the entrypoint raised, unwrapped.

        Cancellation:
            Cancelling the caller shuts the job down (:meth:`shutdown`, reason
            ``job_shutdown``): running sessions close and the entrypoint has
            ``shutdown_grace`` seconds to return before it is cancelled; then the call raises
            the cancellation.
        """
        async with open_unwrapping_nursery() as nursery:  # the entrypoint's error, unwrapped
            await nursery.start(self._watch_connection)
            helpers_done = trio.CancelScope()
            nursery.start_soon(_shutdown_when_cancelled, self, helpers_done)
            try:
                if on_ready is not None:
                    on_ready(self)
                result = await self._run_with_requests(entrypoint)
            finally:
                helpers_done.cancel()
                nursery.cancel_scope.cancel()
        return result

    async def _run_with_requests(self, entrypoint: Callable[[JobContext], Awaitable[R]]
                                 ) -> R | None:
        """The entrypoint, then the server calls still in flight (``delete_room``…), for
        at most ``shutdown_grace`` seconds."""
        result: R | None = None
        try:
            with trio.CancelScope() as pending:
                async with open_unwrapping_nursery() as requests:
                    self._requests = requests
                    try:
                        result = await self._run_entrypoint(entrypoint)
                    finally:
                        pending.deadline = trio.current_time() + self.shutdown_grace
        finally:
            self._requests = None
        if pending.cancelled_caught:
            logger.warning("server calls of the job were still running %.0f s after it ended; "
                           "cancelled", self.shutdown_grace)
        return result

    async def _run_entrypoint(self, entrypoint: Callable[[JobContext], Awaitable[R]]
                              ) -> R | None:
        """The entrypoint, then the sessions it left running, then ``on_session_end``."""
        token = _current_job.set(self)
        try:
            with self._scope, owning_sessions(self):
                async with open_livekit_job_context(self), \
                        open_unwrapping_nursery() as owned:
                    self._owned = owned
                    try:
                        result = await entrypoint(self)
                    except Exception:
                        # as LiveKit's job crashing: its sessions close with job_shutdown
                        self.shutdown(CloseReason.JOB_SHUTDOWN)
                        raise
                # the entrypoint returned and every session it owned closed
                self._owned = None
                await self._session_ended()
                return result
        finally:
            self._owned = None
            _current_job.reset(token)
        logger.warning("the entrypoint and its sessions did not finish within %.0f s of the "
                       "shutdown; cancelled", self.shutdown_grace)
        return None

    async def _session_ended(self) -> None:
        if self.on_session_end is None:
            return
        with trio.move_on_after(self.session_end_timeout) as timeout:
            try:
                await self.on_session_end(self)
            except Exception:
                logger.exception("on_session_end failed")
        if timeout.cancelled_caught:
            logger.error("on_session_end timed out after %.0f s", self.session_end_timeout)

    @property
    def end_reason(self) -> str:
        """Why the job ended (what the shutdown callbacks get): the shutdown's reason, else
        the close reason of the last session it ran, else ``"entrypoint returned"``."""
        if self._shutdown_text is not None:
            return self._shutdown_text
        return self._last_close_reason or "entrypoint returned"

    async def run_shutdown_callbacks(self) -> None:
        """Run the callbacks of :meth:`add_shutdown_callback` with :attr:`end_reason` (once;
        the runners call it after the room disconnected).

        Cancellation: shielded: the callbacks get ``shutdown_grace`` seconds even when the
        caller is cancelled.
        """
        await self._shutdown_callbacks.run(self.end_reason, grace=self.shutdown_grace)

    async def _watch_connection(self, *,
                                task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                                ) -> None:
        """The room's end shuts the job down; watched from before the entrypoint runs."""
        push, disconnected = self.bridge.callback_channel(convert=lambda *args: args)
        self.room.on("disconnected", push)
        try:
            task_status.started()
            del task_status  # not kept: it holds start()'s temporary nursery
            # checked after the handler is registered: a disconnect shows here or as an event
            if self.room.isconnected():
                reason = _reason_name(await disconnected.receive())
            else:
                reason = "disconnected before the job started"
            self._on_room_disconnected(reason)
        finally:
            self.room.off("disconnected", push)
            disconnected.close()

    def _on_room_disconnected(self, reason: str) -> None:
        if self._room_gone.is_set():
            return
        logger.warning("the room disconnected (%s); shutting the job down", reason)
        self._room_gone.set()
        self.shutdown(CloseReason.JOB_SHUTDOWN)


_current_job: contextvars.ContextVar[JobContext] = contextvars.ContextVar("agents_trio_job")


@overload
def get_job_context(*, required: Literal[True] = True) -> JobContext: ...


@overload
def get_job_context(*, required: Literal[False]) -> JobContext | None: ...


def get_job_context(*, required: bool = True) -> JobContext | None:
    """The :class:`JobContext` of the entrypoint this code runs in (LiveKit's
    ``get_job_context``): set for the entrypoint and every task it starts.

    Raises:
        RuntimeError: Outside a job, unless ``required=False`` (then None).
    """
    ctx = _current_job.get(None)
    if ctx is None and required:
        raise RuntimeError(
            "no job context found, are you running this code inside a job entrypoint?")
    return ctx


get_current_job_context = get_job_context


@contextlib.contextmanager
def acting_for_job(ctx: JobContext) -> Iterator[None]:
    """Make ``ctx`` the job of the calling task for the block (what ``get_job_context()``
    returns there and in the tasks it starts), for code that drives a job's session from
    outside its entrypoint (``simulate --agent``)."""
    token = _current_job.set(ctx)
    try:
        yield
    finally:
        _current_job.reset(token)


class _SessionRun:
    """One session's run in the job, as a second start of it sees it: whether the first
    start ended, and how the run ended."""

    def __init__(self, job: JobContext) -> None:
        self._job = job
        self.started = trio.Event()  # set once the first start ended, however it ended
        self.closed_with: str | None = None  # the session's close reason, once it closed
        self._ended = trio.Event()

    def end(self) -> None:
        self.started.set()
        self._ended.set()

    async def reason(self) -> str | None:
        """Once the run ended: the session's close reason, or the job's shutdown reason if
        it never ran."""
        await self._ended.wait()
        return self.closed_with if self.closed_with is not None else self._job.shutdown_reason


class _CloseWatch:
    """The ``close`` event of one session, awaited by the job that runs it."""

    def __init__(self, session: AgentSession) -> None:
        self._session = session
        self._closed = trio.Event()
        self.reason: str | None = None
        session.on("close", self._on_close)

    def _on_close(self, ev: CloseEvent) -> None:
        self.reason = str(ev.reason)
        self._closed.set()

    async def wait(self) -> str | None:
        await self._closed.wait()
        return self.reason

    def detach(self) -> None:
        self._session.off("close", self._on_close)


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


async def _cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


def _reason_name(args: tuple[Any, ...]) -> str:
    try:
        return rtc.DisconnectReason.Name(args[0])
    except (IndexError, ValueError, TypeError):
        return repr(args[0]) if args else "no reason given"


async def _shutdown_when_cancelled(ctx: JobContext, done: trio.CancelScope) -> None:
    """The job's caller cancelled (LiveKit ending the job): shut down, so sessions close with
    ``job_shutdown`` and the entrypoint gets its grace, instead of being torn down."""
    with done:
        try:
            await trio.sleep_forever()
        finally:
            if not done.cancel_called:
                ctx.shutdown(CloseReason.JOB_SHUTDOWN)


async def run_job(entrypoint: Callable[[JobContext], Awaitable[R]], *, url: str,
                  token: str | None = None,
                  api_key: str | None = None, api_secret: str | None = None,
                  room_name: str | None = None, identity: str | None = None,
                  job_id: str | None = None, connect_timeout: float = 10.0,
                  shutdown_grace: float = 10.0, open_room_fn: RoomOpener = open_room,
                  on_ready: Callable[[JobContext], object] | None = None,
                  proc: JobProcess | None = None,
                  bridge: AsyncioBridge | None = None,
                  inference_executor: InferenceExecutor | None = None) -> R | None:
    """Connect to a room and run ``entrypoint(ctx)`` until it returns.

    Args:
        entrypoint: A Trio async function taking a :class:`JobContext`.
        url: The LiveKit server URL.
        token: An access token; or mint one from ``api_key``/``api_secret`` for
            ``room_name`` and ``identity``.
        job_id: The dispatched job's id, if any.
        connect_timeout: Seconds before giving up connecting.
        shutdown_grace: Seconds the entrypoint gets to return once the job shuts down.
        open_room_fn: How to connect (tests pass a fake room).
        on_ready: Called with the context before the entrypoint runs (the worker uses it to
            deliver LiveKit's shutdown requests).
        proc: The process the job runs in (what the server's prewarm filled); a new one by
            default.

        bridge: An open bridge to run on (the worker's job host shares one among all the jobs
            of a process); by default the job opens its own and closes it when it ends.
        inference_executor: LiveKit's inference executor for the job's plugins, callable
            from the bridge's loop (the packed worker gives its job's; by default one is
            started when needed, see :mod:`agents_trio.livekit_job`).

    The job ends when the entrypoint returned and the sessions it started without ``async
    with`` closed; then the room disconnects and the shutdown callbacks run.

    Returns:
        What the entrypoint returned (None if it was cancelled after the grace).

    Raises:
        RoomConnectError: Bad URL or credentials, unreachable server, timeout.
        Whatever the entrypoint raised (e.g. ``RoomDisconnectedError`` from
        :meth:`JobContext.wait_for_participant`).

    Cancellation:
        Cancelling the caller shuts the job down (:meth:`JobContext.shutdown`, reason
        ``job_shutdown``): running sessions close and the entrypoint has ``shutdown_grace``
        seconds to return before it is cancelled; then the room disconnects and the call
        raises the cancellation.
    """
    if not token:
        if not room_name:
            raise RoomConnectError("a room name is needed to mint a token (--room)")
        token = mint_token(api_key or "", api_secret or "", room=room_name,
                           identity=identity or f"agent-{uuid.uuid4().hex[:8]}")
    async with AsyncExitStack() as stack:
        if bridge is None:
            bridge = await stack.enter_async_context(open_bridge())
        await stack.enter_async_context(open_plugin_http_context(bridge))
        ctx: JobContext | None = None
        try:
            async with open_room_fn(url, token, bridge=bridge,
                                    connect_timeout=connect_timeout) as room:
                ctx = JobContext(bridge, room, job_id=job_id, shutdown_grace=shutdown_grace,
                                 proc=proc, url=url)
                ctx.inference_executor = inference_executor
                logger.info("connected to room %s as %s", getattr(room, "name", "?"),
                            room.local_participant.identity)
                return await ctx.run_entrypoint(entrypoint, on_ready=on_ready)
        finally:
            if ctx is not None:  # as LiveKit: once the room disconnected
                await ctx.run_shutdown_callbacks()


@asynccontextmanager
async def open_plugin_http_context(bridge: AsyncioBridge) -> AsyncIterator[None]:
    """The shared HTTP session LiveKit plugins expect from their job (``http_session()``).

    LiveKit Agents sets it up in its job processes; many plugins (Deepgram, Cartesia,
    ElevenLabs, …) fail without it. It is bound in the caller's context, so every task and
    bridge call started from the block sees it; it is closed when the block exits. Does
    nothing when livekit-agents is not installed or a session is already bound.

    Cancellation: leaving the block, cancelled or not, closes the HTTP session (shielded,
    at most 5 s).
    """
    http = PluginHttpSession()
    http.bind_here()
    try:
        yield
    finally:
        await http.aclose(bridge)


def load_entrypoint(spec: str) -> Entrypoint:
    """Import ``"module:function"`` or ``"path/to/file.py:function"`` (default name
    ``entrypoint``).

    Raises:
        ValueError: The module or the function cannot be found, or it is not async.
    """
    target, _, name = spec.partition(":")
    name = name or "entrypoint"
    try:
        if target.endswith(".py") or os.sep in target:
            module_name = f"_agents_trio_app_{abs(hash(os.path.abspath(target)))}"
            file_spec = importlib.util.spec_from_file_location(module_name, target)
            if file_spec is None or file_spec.loader is None:
                raise ValueError(f"cannot load {target!r}")
            module = importlib.util.module_from_spec(file_spec)
            sys.modules[module_name] = module
            file_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except (ImportError, FileNotFoundError) as e:
        raise ValueError(f"cannot import the entrypoint module {target!r}: {e}") from e
    fn = getattr(module, name, None)
    if fn is None:
        raise ValueError(f"{target!r} has no {name!r} (expected `async def {name}(ctx)`)")
    if not callable(fn):
        raise ValueError(f"{spec!r} is not callable")
    return fn  # type: ignore[no-any-return]

