"""LiveKit's legacy way to describe an agent's worker: ``WorkerOptions(entrypoint_fnc=...,
prewarm_fnc=..., request_fnc=...)`` handed to ``cli.run_app``. Here it describes an
:class:`~agents_trio.server.AgentServer` (:meth:`WorkerOptions.server`), which is what
``agents_trio.cli.run_app`` runs.

    async def entrypoint(ctx: JobContext) -> None:   # a Trio async function
        ...

    if __name__ == "__main__":
        cli.run_app(WorkerOptions(entrypoint_fnc=entrypoint, prewarm_fnc=prewarm))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .server import AgentServer, Entrypoint, SetupFunction

__all__ = ["WorkerOptions"]

_NOT_GIVEN: Any = object()


class WorkerOptions:
    """LiveKit's ``WorkerOptions`` (an alias of its ``ServerOptions``), for a Trio entrypoint.

    Args:
        entrypoint_fnc: ``async def entrypoint(ctx: JobContext)``, a Trio async function.
        request_fnc: LiveKit's job request hook, handed a ``JobRequest`` (``await
            req.accept()``); it runs in LiveKit's worker, so it is asyncio-flavoured. None
            (default): accept every job, as LiveKit's default does.
        prewarm_fnc: Called with the :class:`~agents_trio.job_process.JobProcess` once per
            process before its first job (the server's ``setup_fnc``).
        load_fnc: LiveKit's load function.
        agent_name: Register for explicit dispatch under this name.
        worker_type: LiveKit's ``ServerType``/``WorkerType``; rooms only.
        The other parameters are LiveKit's ``AgentServer`` options, passed on when given.

    Raises:
        TypeError: ``entrypoint_fnc`` is not an async function, or a hook is not callable.
        ValueError: A ``worker_type`` other than rooms.
    """

    def __init__(self, entrypoint_fnc: Entrypoint, request_fnc: Callable[..., Any] | None = None,
                 prewarm_fnc: SetupFunction | None = None,
                 load_fnc: Callable[..., float] | None = None, *,
                 job_executor_type: object = _NOT_GIVEN, load_threshold: object = _NOT_GIVEN,
                 job_memory_warn_mb: object = _NOT_GIVEN,
                 job_memory_limit_mb: object = _NOT_GIVEN, drain_timeout: object = _NOT_GIVEN,
                 num_idle_processes: object = _NOT_GIVEN,
                 shutdown_process_timeout: object = _NOT_GIVEN,
                 session_end_timeout: object = _NOT_GIVEN,
                 initialize_process_timeout: object = _NOT_GIVEN,
                 permissions: object = _NOT_GIVEN, agent_name: str = "",
                 worker_type: object = None, max_retry: object = _NOT_GIVEN,
                 ws_url: str | None = None, api_key: str | None = None,
                 api_secret: str | None = None, log_level: object = _NOT_GIVEN,
                 host: object = _NOT_GIVEN, port: object = _NOT_GIVEN,
                 http_proxy: object = _NOT_GIVEN,
                 multiprocessing_context: object = _NOT_GIVEN,
                 preload_modules: object = _NOT_GIVEN, prometheus_port: object = _NOT_GIVEN,
                 prometheus_multiproc_dir: object = _NOT_GIVEN) -> None:
        given = dict(locals())
        self.entrypoint_fnc = entrypoint_fnc
        self.request_fnc = request_fnc
        self.prewarm_fnc = prewarm_fnc
        self.load_fnc = load_fnc
        self.agent_name = agent_name
        self.worker_type = worker_type
        hooks = ("self", "given", "entrypoint_fnc", "request_fnc", "prewarm_fnc", "load_fnc",
                 "agent_name", "worker_type")
        self.server_options: dict[str, Any] = {
            name: value for name, value in given.items()
            if name not in hooks and value is not _NOT_GIVEN}
        self._server = self._build()   # bad options fail here, at construction

    def _build(self) -> AgentServer:
        server = AgentServer(setup_fnc=self.prewarm_fnc, load_fnc=self.load_fnc,
                             **self.server_options)
        server.rtc_session(self.entrypoint_fnc, agent_name=self.agent_name,
                           type=self.worker_type, on_request=self.request_fnc)
        return server

    def server(self) -> AgentServer:
        """The :class:`AgentServer` these options describe (one per options object)."""
        return self._server

    def __repr__(self) -> str:
        return f"WorkerOptions(entrypoint_fnc={self.entrypoint_fnc!r})"
