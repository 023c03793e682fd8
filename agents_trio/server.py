"""``AgentServer``: an agent file written as LiveKit's, on the Trio runtime.

    server = AgentServer()
    server.setup_fnc = prewarm                  # once per process: fills proc.userdata

    @server.rtc_session(agent_name="support")
    async def entrypoint(ctx: JobContext) -> None:   # a Trio async function
        session = AgentSession(...)
        await session.start(MyAgent(), room=ctx.room)

    if __name__ == "__main__":
        cli.run_app(server)    # start | dev | connect | console [--text] | download-files

``start``, ``dev`` and ``connect`` run LiveKit's own worker (registration, the process pool,
load reporting): :meth:`AgentServer.build_livekit_server` makes LiveKit's ``AgentServer`` with
the entrypoint registered through :mod:`agents_trio.worker`. ``console`` runs the entrypoint
in this process (:mod:`agents_trio.console`).

The process pool pickles the entrypoint and the prewarm, by reference: keep them module-level
functions. An entrypoint defined in the script run as ``python my_agent.py start`` works,
as in LiveKit: each job process imports that script again (not as ``__main__``, so
``cli.run_app`` does not run there) and finds the functions by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, overload

from .job import JobContext
from .job_process import JobProcess

if TYPE_CHECKING:
    from livekit.agents import AgentServer as LiveKitAgentServer

__all__ = ["AgentServer", "ServerEntrypoint"]

Entrypoint = Callable[[JobContext], Awaitable[object]]
SetupFunction = Callable[[JobProcess], object]

_NOT_GIVEN: Any = object()

#: LiveKit's ``AgentServer`` parameters, passed on to it when given
_LIVEKIT_OPTIONS = (
    "job_executor_type", "load_threshold", "job_memory_warn_mb", "job_memory_limit_mb",
    "drain_timeout", "num_idle_processes", "shutdown_process_timeout", "session_end_timeout",
    "initialize_process_timeout", "permissions", "max_retry", "ws_url", "api_key",
    "api_secret", "host", "port", "http_proxy", "multiprocessing_context", "preload_modules",
    "prometheus_port", "prometheus_multiproc_dir", "log_level")


class ServerEntrypoint:
    """The registered entrypoint with its ``on_session_end``: what LiveKit's process pool
    pickles (by reference to the two functions) and each job runs.

    Args:
        entrypoint: The Trio entrypoint.
        on_session_end: Awaited with the job context once the entrypoint returned and its
            sessions closed (LiveKit's ``on_session_end``), or None.
        session_end_timeout: Seconds ``on_session_end`` may take (the server's option of
            that name); None keeps the job's default.
    """

    def __init__(self, entrypoint: Entrypoint,
                 on_session_end: Callable[[JobContext], Awaitable[object]] | None = None,
                 session_end_timeout: float | None = None) -> None:
        self.entrypoint = entrypoint
        self.on_session_end = on_session_end
        self.session_end_timeout = session_end_timeout
        self.__name__ = getattr(entrypoint, "__name__", "entrypoint")

    async def __call__(self, ctx: JobContext) -> object:
        """Run the entrypoint as ``ctx``'s job.

        Cancellation: as the entrypoint.
        """
        if self.on_session_end is not None:
            ctx.on_session_end = self.on_session_end
        if self.session_end_timeout is not None:
            ctx.session_end_timeout = self.session_end_timeout
        return await self.entrypoint(ctx)

    def __repr__(self) -> str:
        return f"ServerEntrypoint({self.entrypoint!r})"


def _is_room_type(value: object) -> bool:
    """LiveKit's ``ServerType.ROOM`` (an enum member whose value is 0), or ``"room"``."""
    return (str(getattr(value, "name", "")).lower() == "room"
            or str(getattr(value, "value", value)).lower() == "room")


def _check_callable(name: str, value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a callable or None, got {value!r}")


class AgentServer:
    """LiveKit's ``AgentServer``, for Trio entrypoints: register one with
    :meth:`rtc_session`, run it with ``agents_trio.cli.run_app(server)``.

    Takes LiveKit's parameters; those given are passed to LiveKit's ``AgentServer`` when
    ``start``, ``dev`` or ``connect`` builds it (``ws_url``, ``api_key`` and ``api_secret``
    default to ``LIVEKIT_URL``, ``LIVEKIT_API_KEY`` and ``LIVEKIT_API_SECRET`` there).

    Args:
        setup_fnc: The prewarm: called with the :class:`JobProcess` once per process before
            its first job (in console mode, once before the entrypoint). Sync, as LiveKit's.
        load_fnc: LiveKit's load function (runs in LiveKit's worker).

    Raises:
        TypeError: ``setup_fnc`` or ``load_fnc`` is not callable.
    """

    def __init__(self, *, job_executor_type: object = _NOT_GIVEN,
                 load_threshold: object = _NOT_GIVEN, job_memory_warn_mb: object = _NOT_GIVEN,
                 job_memory_limit_mb: object = _NOT_GIVEN, drain_timeout: object = _NOT_GIVEN,
                 num_idle_processes: object = _NOT_GIVEN,
                 shutdown_process_timeout: object = _NOT_GIVEN,
                 session_end_timeout: object = _NOT_GIVEN,
                 initialize_process_timeout: object = _NOT_GIVEN,
                 permissions: object = _NOT_GIVEN, max_retry: object = _NOT_GIVEN,
                 ws_url: str | None = None, api_key: str | None = None,
                 api_secret: str | None = None, host: object = _NOT_GIVEN,
                 port: object = _NOT_GIVEN, http_proxy: object = _NOT_GIVEN,
                 multiprocessing_context: object = _NOT_GIVEN,
                 setup_fnc: SetupFunction | None = None,
                 load_fnc: Callable[..., float] | None = None,
                 preload_modules: object = _NOT_GIVEN, prometheus_port: object = _NOT_GIVEN,
                 prometheus_multiproc_dir: object = _NOT_GIVEN,
                 log_level: object = _NOT_GIVEN) -> None:
        _check_callable("setup_fnc", setup_fnc)
        _check_callable("load_fnc", load_fnc)
        given = dict(locals())
        self.server_options: dict[str, Any] = {
            name: given[name] for name in _LIVEKIT_OPTIONS
            if given[name] is not _NOT_GIVEN and given[name] is not None}
        self._setup_fnc = setup_fnc
        self._load_fnc = load_fnc
        self._entrypoint: ServerEntrypoint | None = None
        self.agent_name = ""
        self.on_request: Callable[..., Any] | None = None
        self._listeners: list[tuple[str, str, Callable[..., object]]] = []

    @property
    def setup_fnc(self) -> SetupFunction | None:
        return self._setup_fnc

    @setup_fnc.setter
    def setup_fnc(self, value: SetupFunction | None) -> None:
        _check_callable("setup_fnc", value)
        self._setup_fnc = value

    @property
    def load_fnc(self) -> Callable[..., float] | None:
        return self._load_fnc

    @load_fnc.setter
    def load_fnc(self, value: Callable[..., float] | None) -> None:
        _check_callable("load_fnc", value)
        self._load_fnc = value

    @property
    def entrypoint(self) -> ServerEntrypoint:
        """The registered entrypoint.

        Raises:
            RuntimeError: None is registered yet.
        """
        if self._entrypoint is None:
            raise RuntimeError("no entrypoint: register one with @server.rtc_session()")
        return self._entrypoint

    @overload
    def rtc_session(self, func: Entrypoint, *, agent_name: str = "", type: object = None,
                    on_request: Callable[..., Any] | None = None,
                    on_session_end: Callable[[JobContext], Awaitable[object]] | None = None,
                    on_simulation_end: object = None) -> Entrypoint: ...

    @overload
    def rtc_session(self, func: None = None, *, agent_name: str = "", type: object = None,
                    on_request: Callable[..., Any] | None = None,
                    on_session_end: Callable[[JobContext], Awaitable[object]] | None = None,
                    on_simulation_end: object = None) -> Callable[[Entrypoint], Entrypoint]: ...

    def rtc_session(self, func: Entrypoint | None = None, *, agent_name: str = "",
                    type: object = None, on_request: Callable[..., Any] | None = None,
                    on_session_end: Callable[[JobContext], Awaitable[object]] | None = None,
                    on_simulation_end: object = None
                    ) -> Entrypoint | Callable[[Entrypoint], Entrypoint]:
        """Register the entrypoint (a decorator, with or without arguments, or a call).

        Args:
            func: ``async def entrypoint(ctx: JobContext)``, a Trio async function.
            agent_name: Register for explicit dispatch under this name (LiveKit's).
            type: LiveKit's ``ServerType``; only rooms (the default) are supported.
            on_request: LiveKit's job request hook (``await req.accept()``); it runs in
                LiveKit's worker, so it is asyncio-flavoured.
            on_session_end: A Trio async function awaited with the job context once the
                entrypoint returned and its sessions closed.
            on_simulation_end: Not supported (must be None).

        Returns:
            The function itself (so it stays picklable by name).

        Raises:
            RuntimeError: An entrypoint is registered already (one per server, as LiveKit).
            TypeError: ``func`` or ``on_session_end`` is not an async function.
            ValueError: A ``type`` other than rooms, or ``on_simulation_end``.
        """
        if type is not None and not _is_room_type(type):
            raise ValueError(f"type={type!r} is not supported: agents_trio serves rooms only")
        if on_simulation_end is not None:
            raise ValueError("on_simulation_end is not supported")
        if on_session_end is not None and not inspect.iscoroutinefunction(on_session_end):
            raise TypeError("on_session_end must be an async function taking the JobContext")
        _check_callable("on_request", on_request)

        def register(f: Entrypoint) -> Entrypoint:
            if not inspect.iscoroutinefunction(f):
                raise TypeError(f"the entrypoint must be an async function (`async def "
                                f"entrypoint(ctx: JobContext)`), got {f!r}")
            if self._entrypoint is not None:
                raise RuntimeError("an AgentServer runs one rtc_session entrypoint; "
                                   f"{self._entrypoint.entrypoint!r} is registered already")
            self._entrypoint = ServerEntrypoint(
                f, on_session_end, self.server_options.get("session_end_timeout"))
            self.agent_name = agent_name
            self.on_request = on_request
            return f

        if func is not None:
            return register(func)
        return register

    # -- LiveKit's worker events ----------------------------------------------------------
    def on(self, event: str, callback: Callable[..., object] | None = None
           ) -> Callable[..., object]:
        """Call ``callback`` on LiveKit's worker event ``event`` (``worker_started``,
        ``worker_registered``, …) once ``start``, ``dev`` or ``connect`` runs the worker; it
        runs in LiveKit's worker (asyncio). Usable as a decorator."""
        return self._listen("on", event, callback)

    def once(self, event: str, callback: Callable[..., object] | None = None
             ) -> Callable[..., object]:
        """As :meth:`on`, for the first occurrence only."""
        return self._listen("once", event, callback)

    def off(self, event: str, callback: Callable[..., object]) -> None:
        """Forget a callback given to :meth:`on` or :meth:`once`."""
        self._listeners = [entry for entry in self._listeners
                           if not (entry[1] == event and entry[2] is callback)]

    def _listen(self, how: str, event: str, callback: Callable[..., object] | None
                ) -> Callable[..., object]:
        if callback is None:
            def register(f: Callable[..., object]) -> Callable[..., object]:
                self._listen(how, event, f)
                return f
            return register
        _check_callable("callback", callback)
        self._listeners.append((how, event, callback))
        return callback

    def build_livekit_server(self, **overrides: Any  # noqa: ANN401 - LiveKit types them
                             ) -> LiveKitAgentServer:
        """LiveKit's ``AgentServer`` with this server's options and the entrypoint registered
        to run on the Trio runtime (``agents_trio.worker``); ``overrides`` replace options.

        Raises:
            RuntimeError: No entrypoint is registered.
            ImportError: livekit-agents is not installed.
        """
        from .worker import create_agent_server

        options = {**self.server_options, **overrides}
        if self._setup_fnc is not None:
            options.setdefault("setup_fnc", self._setup_fnc)
        if self._load_fnc is not None:
            options.setdefault("load_fnc", self._load_fnc)
        server = create_agent_server(self.entrypoint, agent_name=self.agent_name,
                                     on_request=self.on_request, **options)
        for how, event, callback in self._listeners:
            getattr(server, how)(event, callback)
        return server

    def prewarm(self) -> JobProcess:
        """A :class:`JobProcess` for this process, with ``setup_fnc`` run on it (what the
        console does before its one job)."""
        proc = JobProcess()
        if self._setup_fnc is not None:
            self._setup_fnc(proc)
        return proc
