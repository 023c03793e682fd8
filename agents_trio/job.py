"""Running an agent in a LiveKit room: the job context an entrypoint receives, and the runner.

An entrypoint is a Trio async function taking a :class:`JobContext`::

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(stt=adapt(deepgram.STT()), llm=adapt(openai.LLM()), ...)
        await ctx.run_session(session, Assistant())

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

import contextvars
import importlib
import importlib.util
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import trio
from livekit import rtc

from .io.bridge import AsyncioBridge, open_bridge
from .io.room import (RoomConnectError, RoomDisconnectedError, RoomIO, RoomOptions, mint_token,
                      open_room, open_room_io)

from .events import CloseReason
from .nurseries import open_unwrapping_nursery

if TYPE_CHECKING:
    from .agent import Agent
    from .session import AgentSession

__all__ = ["JobContext", "get_current_job_context", "get_job_context", "load_entrypoint",
           "open_plugin_http_context", "run_job"]

logger = logging.getLogger("agents_trio.job")

R = TypeVar("R")
Entrypoint = Callable[["JobContext"], Awaitable[Any]]
RoomOpener = Callable[..., AbstractAsyncContextManager[Any]]


class JobContext:
    """What an entrypoint gets: the bridge, the connected room, and a way to run a session.

    Attributes:
        bridge: The asyncio bridge the room and the plugins run on.
        room: The connected ``rtc.Room``.
        job_id: The dispatched job's id (``None`` when run by ``connect``).
    """

    def __init__(self, bridge: AsyncioBridge, room: rtc.Room, *, job_id: str | None = None,
                 shutdown_grace: float = 10.0) -> None:
        self.bridge = bridge
        self.room = room
        self.job_id = job_id
        self.shutdown_grace = shutdown_grace
        self.shutdown_reason: CloseReason | None = None
        self._sessions: list[AgentSession] = []
        # the entrypoint's scope: shielded from the job's caller, whose cancellation becomes
        # a shutdown; its own deadline (set by shutdown) still ends it
        self._scope = trio.CancelScope(shield=True)
        self._room_gone = trio.Event()
        self._room_ios: list[RoomIO] = []

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
        if self.shutdown_reason is not None:
            return self.shutdown_reason
        self._sessions.append(session)
        try:
            async with AsyncExitStack() as stack:
                try:
                    room_io = await stack.enter_async_context(open_room_io(
                        self.room, session, options=room_options, bridge=self.bridge))
                except RoomDisconnectedError:
                    self._on_room_disconnected("seen when linking the session")
                    return self.shutdown_reason
                await stack.enter_async_context(session)
                self._room_ios.append(room_io)
                if self.shutdown_reason is not None:
                    return self.shutdown_reason
                await session.start(agent)
                await stack.enter_async_context(self._reachable_on_room(session))
                return await room_io.wait_session_closed()
        finally:
            self._sessions.remove(session)

    @asynccontextmanager
    async def _reachable_on_room(self, session: AgentSession) -> AsyncIterator[None]:
        """As LiveKit's ``AgentSession`` in a room: while the block runs, ``session`` is served
        on the room's ``lk.agent.session`` byte streams, so LiveKit's simulation tooling and
        remote clients (``RemoteSession.from_room``) reach it. A room without byte streams
        (a test double) is left as it is."""
        if not callable(getattr(self.room, "register_byte_stream_handler", None)):
            yield
            return
        from .remote.lk.room import host_session_on_room

        async with trio.open_nursery() as nursery:
            await nursery.start(host_session_on_room, session, self.room, self.bridge)
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

    def shutdown(self, reason: CloseReason = CloseReason.JOB_SHUTDOWN) -> None:
        """End the job: running sessions close with ``reason`` and, after
        ``shutdown_grace`` seconds, the entrypoint is cancelled. Sync; idempotent."""
        if self.shutdown_reason is not None:
            return
        self.shutdown_reason = reason
        for session in list(self._sessions):
            session.shutdown(drain=False, reason=reason)
        self._scope.deadline = min(self._scope.deadline,
                                   trio.current_time() + self.shutdown_grace)

    async def run_entrypoint(self, entrypoint: Callable[[JobContext], Awaitable[R]], *,
                             on_ready: Callable[[JobContext], object] | None = None
                             ) -> R | None:
        """Run ``entrypoint(self)`` as this job: what :func:`run_job` does once connected.

        The room's connection is watched from before the entrypoint runs: its end shuts the
        job down (reason ``job_shutdown``).

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
                result = await self._run_entrypoint(entrypoint)
            finally:
                helpers_done.cancel()
                nursery.cancel_scope.cancel()
        return result

    async def _run_entrypoint(self, entrypoint: Callable[[JobContext], Awaitable[R]]
                              ) -> R | None:
        token = _current_job.set(self)
        try:
            with self._scope:
                return await entrypoint(self)
        finally:
            _current_job.reset(token)
        logger.warning("the entrypoint did not return within %.0f s of the shutdown; "
                       "cancelled", self.shutdown_grace)
        return None

    async def _watch_connection(self, *,
                                task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                                ) -> None:
        """The room's end shuts the job down; watched from before the entrypoint runs."""
        push, disconnected = self.bridge.callback_channel(convert=lambda *args: args)
        self.room.on("disconnected", push)
        try:
            task_status.started()
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
                  bridge: AsyncioBridge | None = None) -> R | None:
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
        bridge: An open bridge to run on (the worker's job host shares one among all the jobs
            of a process); by default the job opens its own and closes it when it ends.

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
        room = await stack.enter_async_context(open_room_fn(
            url, token, bridge=bridge, connect_timeout=connect_timeout))
        ctx = JobContext(bridge, room, job_id=job_id, shutdown_grace=shutdown_grace)
        logger.info("connected to room %s as %s", getattr(room, "name", "?"),
                    room.local_participant.identity)
        return await ctx.run_entrypoint(entrypoint, on_ready=on_ready)


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
    try:
        from livekit.agents.utils import http_context
    except ImportError:
        yield
        return
    # LiveKit's public http_context.open() binds the session in the asyncio context, where the
    # Trio side would not see it; binding it here needs the module's private names.
    if http_context._ContextVar.get(None) is not None:  # noqa: SLF001 - see above
        yield
        return
    session_factory = http_context._new_session_ctx()  # noqa: SLF001 - see above
    try:
        yield
    finally:
        http_context._ContextVar.set(None)  # noqa: SLF001 - see above
        with trio.move_on_after(5, shield=True):
            if not bridge.closed:
                await bridge.run(_close_http_session, session_factory)


async def _close_http_session(session_factory: Callable[[], Any]) -> None:
    """asyncio-flavoured: close the plugins' HTTP session."""
    await session_factory().close()


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

