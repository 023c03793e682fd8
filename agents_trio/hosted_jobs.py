"""LiveKit jobs handed straight to the job host: no thread, loop or ping per job.

LiveKit's ``THREAD`` job executor gives every job a thread with an asyncio loop of its own, a
socket pair to the worker's loop and a ping over it every 2.5 s. For an agents_trio job all of
that only waits: the session runs on the process's :class:`~agents_trio.job_host.JobHost`. With
hundreds of jobs per process the waiting is not free (each ping wakes a thread, which takes the
GIL from the Trio thread), so :class:`HostedJobPool` takes the place of LiveKit's process pool
in :class:`~agents_trio.worker.PackedAgentServer`:

- a :class:`HostedJob` is LiveKit's ``JobExecutor`` for one job: its entrypoint is a task of the
  worker's own asyncio loop that hands the job to the job host and waits for it;
- the pool keeps LiveKit's pool's contract with the server: ``num_idle_processes`` jobs are
  set up ahead (the server's ``setup_fnc`` runs for each, in a worker thread, with a
  ``JobProcess`` of its own, as with the ``THREAD`` executor), launching takes one of them,
  and the server hears of each job's start, launch and end (``process_started``,
  ``process_job_launched``, ``process_closed``) to report its status;
- closing a job (LiveKit's termination, the worker's close) cancels its task: the Trio
  session closes with ``job_shutdown`` within the entrypoint's grace
  (:class:`~agents_trio.worker.TrioJobEntrypoint`).

LiveKit's dispatch, load reporting and draining are the server's own and unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from livekit.agents import JobExecutorType, JobProcess
from livekit.agents.ipc.job_executor import JobStatus
from livekit.agents.job import RunningJobInfo
from livekit.agents.utils import EventEmitter

if TYPE_CHECKING:
    from .livekit_job import InferenceExecutor

__all__ = ["HostedEntrypoint", "HostedJob", "HostedJobPool"]

logger = logging.getLogger("agents_trio.hosted_jobs")


class HostedEntrypoint(Protocol):
    """What runs a hosted job (:class:`~agents_trio.worker.TrioJobEntrypoint`)."""

    async def run_hosted(self, info: RunningJobInfo, *, proc: JobProcess | None,
                         inference_executor: InferenceExecutor | None) -> None:
        """asyncio-flavoured: run the job on the job host and wait for it.

        Cancellation: cancelling the caller shuts the job down within its grace.
        """
        ...


class HostedJob:
    """LiveKit's ``JobExecutor`` for one job run on the job host, from the worker's loop.

    Args:
        entrypoint: What runs the job.
        setup: The server's ``setup_fnc``, run in a worker thread by :meth:`initialize`.
        inference_executor: The worker's inference process, if it has one.
        http_proxy: For the job's ``JobProcess``.
        initialize_timeout: Seconds ``setup`` may take.
        on_end: Called once when the executor ends (its job ended, or it closed), before
            :meth:`join` returns: the pool drops it there, so nobody joins an ended executor
            still listed.
    """

    def __init__(self, *, entrypoint: HostedEntrypoint,
                 setup: Callable[[JobProcess], Any] | None,
                 inference_executor: InferenceExecutor | None, http_proxy: str | None,
                 initialize_timeout: float,
                 on_end: Callable[[HostedJob], None] | None = None) -> None:
        self._entrypoint = entrypoint
        self._on_end_callback = on_end
        self._setup = setup
        self._inference_executor = inference_executor
        self._initialize_timeout = initialize_timeout
        self._id = f"HOSTED_{uuid.uuid4().hex[:12]}"
        self._user_arguments: Any | None = None
        self._proc: JobProcess | None = None
        self._http_proxy = http_proxy
        self._started = False
        self._running_job: RunningJobInfo | None = None
        self._status: JobStatus | None = None
        self._task: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()

    @property
    def id(self) -> str:
        return self._id

    @property
    def started(self) -> bool:
        return self._started

    @property
    def user_arguments(self) -> Any | None:  # noqa: ANN401 - LiveKit's protocol
        return self._user_arguments

    @user_arguments.setter
    def user_arguments(self, value: Any | None) -> None:  # noqa: ANN401 - LiveKit's protocol
        self._user_arguments = value

    @property
    def running_job(self) -> RunningJobInfo | None:
        return self._running_job

    @property
    def status(self) -> JobStatus:
        if self._status is None:
            raise RuntimeError("no job was launched on this executor")
        return self._status

    async def start(self) -> None:
        """Mark the executor started (nothing runs until a job is launched).

        Cancellation: nothing to cancel; it returns at once.
        """
        if self._started:
            raise RuntimeError("the hosted job is already started")
        if self._ended.is_set():
            raise RuntimeError("the hosted job is closed")
        self._started = True

    async def initialize(self) -> None:
        """Run the server's ``setup_fnc`` with this job's ``JobProcess``, in a worker thread
        (it may load models). Raises what it raised, or TimeoutError after
        ``initialize_timeout`` (the thread then finishes on its own, unused).

        Cancellation: the set-up is abandoned like on a timeout (its thread cannot be
        stopped; it finishes on its own, unused).
        """
        proc = JobProcess(executor_type=JobExecutorType.THREAD,
                          user_arguments=self._user_arguments, http_proxy=self._http_proxy)
        if self._setup is not None:
            await asyncio.wait_for(asyncio.to_thread(self._setup, proc),
                                   self._initialize_timeout)
        self._proc = proc  # set up: a job may be launched

    async def launch_job(self, info: RunningJobInfo) -> None:
        """Start the job ``info`` describes as a task of the calling loop; returns at once.

        Cancellation: nothing to cancel; the job's task is started before it returns.
        """
        if self._running_job is not None:
            raise RuntimeError("the hosted job already runs a job")
        if self._proc is None or self._ended.is_set():
            raise RuntimeError("the hosted job is not initialized, or closed")
        self._running_job = info
        self._status = JobStatus.RUNNING
        self._task = asyncio.create_task(self._run(info), name=f"hosted job {info.job.id}")
        # the task's end, however it ends (even cancelled before its first step)
        self._task.add_done_callback(self._on_end)

    async def _run(self, info: RunningJobInfo) -> None:
        try:
            await self._entrypoint.run_hosted(info, proc=self._proc,
                                              inference_executor=self._inference_executor)
        except Exception:
            self._status = JobStatus.FAILED
            logger.exception("the job failed", extra=self.logging_extra())

    def _on_end(self, task: asyncio.Task[None]) -> None:
        # returned, or cancelled (ended by LiveKit: a shutdown, not a failure)
        if self._status is JobStatus.RUNNING:
            self._status = JobStatus.SUCCESS
        self._end()

    def _end(self) -> None:
        if not self._ended.is_set():
            self._ended.set()
            if self._on_end_callback is not None:
                self._on_end_callback(self)

    async def join(self) -> None:
        """Wait until the job ended (or, never launched, until the executor is closed).

        Cancellation: only the wait is cancelled; the job goes on.
        """
        await self._ended.wait()

    async def aclose(self) -> None:
        """End the job: cancel its task (the Trio session shuts down within the entrypoint's
        grace) and wait for it. An executor without a job just closes.

        Cancellation: only the wait is cancelled; the job still shuts down.
        """
        task = self._task
        if task is None:
            self._end()
            return
        task.cancel()
        await self._ended.wait()

    def logging_extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"executor_id": self._id}
        if self._running_job is not None:
            extra["job_id"] = self._running_job.job.id
            extra["room"] = self._running_job.job.room.name
        return extra

    def __repr__(self) -> str:
        job = self._running_job.job.id if self._running_job is not None else None
        return f"<HostedJob {self._id} job={job}>"


class HostedJobPool(EventEmitter[str]):
    """What LiveKit's ``AgentServer`` needs of its process pool, with :class:`HostedJob`
    executors: ``processes``, ``get_by_job_id``, ``start``, ``launch_job``, ``aclose``,
    the idle target, and its events.

    Args:
        num_idle: Jobs set up ahead of their launch (the server's ``num_idle_processes``).
        close_timeout: Seconds :meth:`aclose` waits for the jobs; the rest is logged.
        others: See :class:`HostedJob`.
    """

    def __init__(self, *, entrypoint: HostedEntrypoint,
                 setup: Callable[[JobProcess], Any] | None,
                 inference_executor: InferenceExecutor | None, http_proxy: str | None,
                 initialize_timeout: float, close_timeout: float, num_idle: int) -> None:
        super().__init__()
        self._job_options: dict[str, Any] = {
            "entrypoint": entrypoint, "setup": setup, "inference_executor": inference_executor,
            "http_proxy": http_proxy, "initialize_timeout": initialize_timeout,
            "on_end": self._drop}
        self._initialize_timeout = initialize_timeout
        self._close_timeout = close_timeout
        self._default_idle = num_idle
        self._target_idle = num_idle
        self._executors: list[HostedJob] = []
        self._idle: collections.deque[HostedJob] = collections.deque()
        self._preparations: set[asyncio.Task[Any]] = set()
        self._closed = False

    @property
    def processes(self) -> list[HostedJob]:
        return self._executors

    def get_by_job_id(self, job_id: str) -> HostedJob | None:
        return next((e for e in self._executors
                     if e.running_job is not None and e.running_job.job.id == job_id), None)

    def set_target_idle_processes(self, num_idle_processes: int) -> None:
        self._target_idle = num_idle_processes
        self._top_up()

    @property
    def target_idle_processes(self) -> int:
        return self._target_idle

    async def start(self) -> None:
        """Set up the idle jobs; waits for them at most ``initialize_timeout`` (+2 s).

        Cancellation: only the wait is cancelled; the set-ups go on.
        """
        preparing = [self._prepare_idle_soon() for _ in range(self._wanted())]
        if preparing:
            done, _ = await asyncio.wait(preparing, timeout=self._initialize_timeout + 2)
            if len(done) < len(preparing):
                logger.warning("timed out setting up the idle hosted jobs")

    async def launch_job(self, info: RunningJobInfo) -> None:
        """Launch ``info`` on an idle job (set one up if none is). Raises what its set-up
        raised, or RuntimeError once the pool is closed.

        Cancellation: while a job is being set up for it, the set-up is abandoned and its
        executor closed; once launched, the job runs on.
        """
        if self._closed:
            raise RuntimeError("the hosted job pool is closed")
        executor = self._idle.popleft() if self._idle else await self._prepared()
        self._top_up()
        # LiveKit's dispatch timeline field: an epoch timestamp, as its own pool sets it
        info.launched_at = time.time()
        await executor.launch_job(info)
        self.emit("process_job_launched", executor)

    async def aclose(self) -> None:
        """Close every job (cancelled: each session shuts down within its grace) and wait
        for them, at most ``close_timeout`` beyond the entrypoints' own grace.

        Cancellation: only the wait is cancelled; the jobs still shut down.
        """
        self._closed = True
        for task in list(self._preparations):
            task.cancel()
        # tasks, not gather(): cancelling this wait must leave every job's close running
        closing = [asyncio.ensure_future(e.aclose()) for e in list(self._executors)]
        if closing:
            done, _ = await asyncio.wait(closing)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    logger.error("closing a hosted job failed", exc_info=task.exception())
        if self._preparations:
            _, late = await asyncio.wait(self._preparations, timeout=self._close_timeout)
            for task in late:
                task.cancel()

    # -- internals ------------------------------------------------------------------------------
    def _wanted(self) -> int:
        target = min(self._target_idle, self._default_idle)
        return max(0, target - len(self._idle) - len(self._preparations))

    def _top_up(self) -> None:
        if not self._closed:
            for _ in range(self._wanted()):
                self._prepare_idle_soon()

    def _prepare_idle_soon(self) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self._prepare_idle())
        self._preparations.add(task)
        task.add_done_callback(self._preparations.discard)
        return task

    async def _prepare_idle(self) -> None:
        try:
            executor = await self._prepared()
        except Exception:
            logger.exception("setting up a hosted job failed")
            return
        if self._closed:
            await executor.aclose()
        else:
            self._idle.append(executor)

    async def _prepared(self) -> HostedJob:
        """A started, set-up executor (dropped from the pool when it ends)."""
        executor = HostedJob(**self._job_options)
        self._executors.append(executor)
        try:
            self.emit("process_created", executor)
            await executor.start()
            self.emit("process_started", executor)
            await executor.initialize()
            self.emit("process_ready", executor)
        except BaseException:
            await executor.aclose()  # ends it: dropped and reported by _drop
            raise
        return executor

    def _drop(self, executor: HostedJob) -> None:
        """An executor ended: drop it at once (the server's drain joins every listed job
        with a running job; a join that returns at once must not find it listed again),
        then tell the server."""
        if executor in self._executors:
            self._executors.remove(executor)
        if executor in self._idle:
            self._idle.remove(executor)
        self.emit("process_closed", executor)
