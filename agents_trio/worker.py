"""Scaling past one machine: LiveKit's agent dispatch runs agents_trio sessions.

LiveKit Agents' own worker (``AgentServer``) registers with the LiveKit server, accepts jobs,
reports its load and drains; nothing of that is reimplemented here. What changes is the job's
entrypoint: :class:`TrioJobEntrypoint` hands each job to the process's
:class:`~agents_trio.job_host.JobHost`, one Trio run in one thread with one trio-asyncio
bridge, where the Trio entrypoint (``async def entrypoint(ctx: agents_trio.JobContext)``) runs
beside every other job of the process, with its own room connection made from the job's URL and
token. LiveKit's asyncio job context never connects its own room.

:func:`create_agent_server` packs jobs: a :class:`PackedAgentServer`, LiveKit's server whose
jobs are tasks of its own loop handed to the job host (:mod:`agents_trio.hosted_jobs`: no
thread, loop or process per job), and a load that is the job host's Trio loop utilisation, so
LiveKit stops sending jobs to a process whose loop is busy and sends them to the others. With
``job_executor_type`` given, LiveKit's own executor runs each job's entrypoint instead (a
thread or a process per job, each handing its job to the job host of its process).
``python -m agents_trio worker --processes N`` runs N such worker processes
(``agents_trio.worker_pool``), one per core by default.

    # app.py
    from agents_trio.worker import create_agent_server
    server = create_agent_server("app:entrypoint", agent_name="support")

    $ python -m agents_trio worker app:entrypoint start     # or: python -m livekit.agents start app.py

Lifecycle: when the Trio entrypoint returns (its session closed), the LiveKit job ends (with
LiveKit's own executors the adapter asks LiveKit to shut it down). When LiveKit ends the job
first (the worker drains, the job is terminated),
it cancels the entrypoint task, and the cancellation reaches the job's Trio task as a job
shutdown: the session closes with reason ``job_shutdown`` (``on_exit`` runs) and the
entrypoint gets ``shutdown_grace`` seconds to return before it is cancelled; the asyncio side
waits that long (plus a margin) for it. A room deleted on the server, or any drop of the Trio
side's connection, shuts the job down the same way and ends it the first way. A job that fails
ends its own LiveKit job; the other jobs of the host go on.

Needs ``livekit-agents`` (the ``livekit-plugins`` extra).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from livekit.agents import AgentServer, JobExecutorType
from livekit.agents import JobProcess as LiveKitJobProcess
from livekit.agents import JobContext as LiveKitJobContext
from livekit.agents.job import RunningJobInfo
from livekit.agents.telemetry import loop_monitor

from .io.bridge import is_asyncio_cancellation, plain_asyncio_in_this_thread
from .hosted_jobs import HostedJobPool
from .job import Entrypoint, RoomOpener, load_entrypoint, run_job
from .job_process import JobProcess
from .livekit_job import CrossLoopInferenceExecutor, InferenceExecutor
from .job_host import JobHost, job_host_load, process_job_host

__all__ = ["PackedAgentServer", "PrepareJobThread", "TrioJobEntrypoint", "create_agent_server"]

logger = logging.getLogger("agents_trio.worker")

# beyond the entrypoint's grace: the room's disconnect and the bridge's close
_CLOSE_MARGIN = 5.0


_loaded: dict[str, Entrypoint] = {}
_loading = threading.Lock()


def _load_once(spec: str) -> Entrypoint:
    """The entrypoint ``spec`` names, imported once per process: the jobs of a process share
    it (an application module that loads a model at import time loads it once)."""
    with _loading:
        if spec not in _loaded:
            _loaded[spec] = load_entrypoint(spec)
        return _loaded[spec]


class TrioJobEntrypoint:
    """A LiveKit job entrypoint (an asyncio callable) that runs a Trio entrypoint.

    It is picklable when ``entrypoint`` is an import string (``"app:entrypoint"``) or a
    module-level function, as LiveKit's process pool needs.

    Args:
        entrypoint: ``"module:function"``, ``"path/file.py:function"`` or the function.
        shutdown_grace: Seconds the Trio entrypoint gets to return once LiveKit cancels the
            job (its session closes with ``job_shutdown`` at once).
        open_room_fn: How to connect (tests pass a fake room).
        job_host: The job host to run on (default: the process's, :func:`process_job_host`).
    """

    def __init__(self, entrypoint: str | Entrypoint, *, shutdown_grace: float = 10.0,
                 open_room_fn: RoomOpener | None = None, job_host: JobHost | None = None
                 ) -> None:
        self.entrypoint = entrypoint
        self.shutdown_grace = shutdown_grace
        self.open_room_fn = open_room_fn
        self.job_host = job_host
        self.__name__ = getattr(entrypoint, "__name__", str(entrypoint))

    def _resolve(self) -> Entrypoint:
        if isinstance(self.entrypoint, str):
            return _load_once(self.entrypoint)
        return self.entrypoint

    def __call__(self, job_ctx: LiveKitJobContext) -> Coroutine[Any, Any, None]:
        return self._run(job_ctx)

    async def _run(self, job_ctx: LiveKitJobContext) -> None:
        """asyncio-flavoured, in a job's own loop (LiveKit's ``THREAD`` or ``PROCESS``
        executor): run the Trio job, then end the LiveKit job."""
        # RunningJobInfo: LiveKit exposes the job's URL and token only here
        info = job_ctx._info  # noqa: SLF001 - LiveKit's JobContext, no public accessor
        # this loop only waits for the job host: LiveKit's blocking monitor on it (a thread
        # and a heartbeat per job) would measure nothing and cost every job
        loop_monitor.stop_monitoring(asyncio.get_running_loop())
        reason = "agents_trio entrypoint finished"
        try:
            await self.run_hosted(info, proc=getattr(job_ctx, "proc", None),
                                  inference_executor=getattr(job_ctx, "inference_executor",
                                                             None))
        except BaseException as e:
            reason = ("agents_trio entrypoint cancelled" if is_asyncio_cancellation(e)
                      else f"agents_trio entrypoint failed: {e!r}")
            raise
        finally:
            job_ctx.shutdown(reason=reason)

    async def run_hosted(self, info: RunningJobInfo, *, proc: LiveKitJobProcess | None,
                         inference_executor: InferenceExecutor | None) -> None:
        """asyncio-flavoured: run the Trio job ``info`` describes on the job host and wait
        for it (from the job's own loop, or the worker's with :class:`PackedAgentServer`).

        Args:
            info: LiveKit's description of the job (its URL, token and id).
            proc: The ``JobProcess`` the server's ``setup_fnc`` filled, if any.
            inference_executor: LiveKit's inference executor on the calling loop, if any.

        Raises:
            Whatever the entrypoint raised; JobHostError if the host is closed.

        Cancellation:
            Cancelling the caller shuts the job down (``job_shutdown``) and waits for it at
            most ``shutdown_grace`` (+5 s) before re-raising.
        """
        host = self.job_host if self.job_host is not None else process_job_host()
        entrypoint = self._resolve()
        kwargs: dict[str, Any] = {"url": info.url, "token": info.token,
                                  "job_id": getattr(info.job, "id", None),
                                  "shutdown_grace": self.shutdown_grace}
        if self.open_room_fn is not None:
            kwargs["open_room_fn"] = self.open_room_fn
        # the executor lives on this loop; the job's plugins call it from the bridge's
        if inference_executor is not None:
            kwargs["inference_executor"] = CrossLoopInferenceExecutor(
                inference_executor, asyncio.get_running_loop())
        if proc is not None:
            kwargs["proc"] = JobProcess.sharing(proc)
        host.start()  # at once unless this is the process's first job
        kwargs["bridge"] = host.bridge
        await host.run(functools.partial(run_job, entrypoint, **kwargs),
                       name=f"agents_trio job {kwargs['job_id']}",
                       cancel_grace=self.shutdown_grace + _CLOSE_MARGIN)

    def __repr__(self) -> str:
        return f"TrioJobEntrypoint({self.entrypoint!r})"


class PrepareJobThread:
    """LiveKit's per-job setup (``setup_fnc``) for jobs run on a job host.

    LiveKit calls it in each job's thread (``THREAD`` executor) or process (``PROCESS``)
    before it makes the job's asyncio loop; a :class:`PackedAgentServer` calls it for each
    hosted job, in a thread of its own. It keeps a job's loop a plain asyncio loop once the
    job host imported trio-asyncio (:func:`~agents_trio.io.bridge.plain_asyncio_in_this_thread`),
    turns off LiveKit's blocked-loop monitor for the job loops made from now on (unless
    ``LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS`` is set: those loops only wait for the job host, and
    each monitor is a thread and a heartbeat every 20 ms, idle job threads included; the
    worker's own loop, started earlier, keeps its monitor), starts the job host, then runs
    the application's own ``setup``. Picklable when ``setup`` is.
    """

    def __init__(self, setup: Callable[[LiveKitJobProcess], Any] | None = None, *,
                 job_host: JobHost | None = None) -> None:
        self.setup = setup
        self.job_host = job_host

    def __call__(self, proc: LiveKitJobProcess) -> None:
        plain_asyncio_in_this_thread()
        os.environ.setdefault(loop_monitor.ENV_WARN_THRESHOLD_MS, "0")
        (self.job_host if self.job_host is not None else process_job_host()).start()
        if self.setup is not None:
            self.setup(proc)


class PackedAgentServer(AgentServer):
    """LiveKit's ``AgentServer`` whose jobs run as tasks of its own loop, each handed to the
    job host (:class:`~agents_trio.hosted_jobs.HostedJobPool`): no thread, asyncio loop or
    ping per job. Registration, dispatch, load reporting, draining and job status are
    LiveKit's, unchanged. :func:`create_agent_server` makes one.

    Args:
        entrypoint: What every job runs.
        options: Passed to ``AgentServer``; ``job_executor_type`` is not one of them (the
            jobs are hosted).
    """

    def __init__(self, entrypoint: TrioJobEntrypoint,
                 **options: Any) -> None:  # noqa: ANN401 - AgentServer types them
        if "job_executor_type" in options:
            raise TypeError("PackedAgentServer hosts its jobs: no job_executor_type")
        # the jobs share the worker process, as with LiveKit's THREAD executor
        super().__init__(job_executor_type=JobExecutorType.THREAD, **options)
        self.trio_entrypoint = entrypoint
        self.__pool: HostedJobPool | None = None

    # AgentServer.run() makes its process pool by assigning this attribute (livekit-agents
    # 1.x); the hosted pool takes its place, with the settings run() has just resolved
    @property  # type: ignore[override]
    def _proc_pool(self) -> HostedJobPool:
        if self.__pool is None:  # as on LiveKit's server before run()
            raise AttributeError("the server has no job pool before it runs")
        return self.__pool

    @_proc_pool.setter
    def _proc_pool(self, livekit_pool: Any) -> None:  # noqa: ANN401 - LiveKit's ProcPool
        self.__pool = HostedJobPool(
            entrypoint=self.trio_entrypoint, setup=self.setup_fnc,
            inference_executor=self._inference_executor,
            http_proxy=self._http_proxy or None,
            initialize_timeout=self._initialize_process_timeout,
            close_timeout=self._shutdown_process_timeout,
            num_idle=livekit_pool.target_idle_processes)


def create_agent_server(entrypoint: str | Entrypoint, *, agent_name: str = "",
                        on_request: Callable[..., Any] | None = None,
                        shutdown_grace: float = 10.0, open_room_fn: RoomOpener | None = None,
                        job_host: JobHost | None = None,
                        **server_options: Any,  # noqa: ANN401 - AgentServer types them
                        ) -> AgentServer:
    """A LiveKit ``AgentServer`` whose jobs run ``entrypoint`` on the process's job host.

    Unless ``server_options`` name a ``job_executor_type``, it is a
    :class:`PackedAgentServer`: every job is a task of the worker's loop handed to the job
    host, with no thread or loop of its own. With ``JobExecutorType.THREAD`` (or ``PROCESS``)
    LiveKit's own executor runs each job's entrypoint in a loop of its own, which hands it to
    the job host of its process. Either way, the load LiveKit balances on is the job host's
    Trio loop utilisation (0 to 1, compared with ``load_threshold``, 0.7 by default in
    production), and ``setup_fnc`` is wrapped in :class:`PrepareJobThread`.

    Args:
        entrypoint: The Trio entrypoint (see :class:`TrioJobEntrypoint`).
        agent_name: Set it for explicit dispatch (LiveKit's ``agent_name``).
        on_request: LiveKit's job request hook (accept or reject), asyncio-flavoured.
        shutdown_grace: See :class:`TrioJobEntrypoint`.
        open_room_fn: How jobs connect (tests pass a fake room).
        job_host: The host jobs run on (default: the process's).
        server_options: Passed to ``AgentServer`` (``ws_url``, ``api_key``, ``api_secret``,
            ``num_idle_processes``, ``job_executor_type``, ``load_fnc``, ``setup_fnc``, …;
            URL and keys default to ``LIVEKIT_*``).
    """
    server_options.setdefault("load_fnc",
                              job_host.load if job_host is not None else job_host_load)
    server_options["setup_fnc"] = PrepareJobThread(server_options.get("setup_fnc"),
                                                   job_host=job_host)
    trio_entrypoint = TrioJobEntrypoint(entrypoint, shutdown_grace=shutdown_grace,
                                        open_room_fn=open_room_fn, job_host=job_host)
    server = (AgentServer(**server_options) if "job_executor_type" in server_options
              else PackedAgentServer(trio_entrypoint, **server_options))
    server.rtc_session(trio_entrypoint, agent_name=agent_name, on_request=on_request)
    return server
