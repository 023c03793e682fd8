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
  set up ahead (the server's ``setup_fnc`` runs for each, in a thread of its own, with a
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
import contextvars
import logging
import threading
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
        setup: The server's ``setup_fnc``, run in a thread of its own by :meth:`initialize`.
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
        # the set-up's outcome while initialize() waits for it: settled once, by the first of
        # its thread, the timeout, the wait's cancellation and the executor's close
        self._setting_up: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        # the first close cancels the job's task; a later one waits for the same end (a
        # second cancellation would cut the job's shutdown grace short)
        self._cancel_sent = False
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
        if self._running_job is None:
            raise RuntimeError("no job was launched on this executor")
        # derived from the executor's end: the server reads the status of a launch in a task
        # of its own, which may run after a job that failed at once has failed; it must read
        # RUNNING there, and the end only with ``process_closed``
        task = self._task
        if task is None or not task.done() or not self._ended.is_set():
            return JobStatus.RUNNING
        # cancelled: ended by LiveKit (a shutdown, not a failure)
        return JobStatus.FAILED if _failed(task) else JobStatus.SUCCESS

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
        """Run the server's ``setup_fnc`` with this job's ``JobProcess``, in a thread of its
        own (it may load models; a daemon thread, not one of the loop's executor: one that
        never returns must not hold a worker the loop needs, nor the process at exit). Raises
        what it raised, TimeoutError after ``initialize_timeout``, or RuntimeError if the
        executor is closed meanwhile; the thread of an abandoned set-up finishes on its own,
        unused, and what it raises then is logged.

        Cancellation: the set-up is abandoned like on a timeout.
        """
        if self._ended.is_set():
            raise RuntimeError("the hosted job is closed")
        proc = JobProcess(executor_type=JobExecutorType.THREAD,
                          user_arguments=self._user_arguments, http_proxy=self._http_proxy)
        if self._setup is not None:
            outcome = self._setting_up = self._set_up_in_thread(self._setup, proc)
            timeout = asyncio.get_running_loop().call_later(
                self._initialize_timeout, _settle, outcome,
                TimeoutError(f"the set-up took more than {self._initialize_timeout} s"))
            try:
                await outcome  # cancelled: cancels the outcome, so a late failure is logged
            finally:
                timeout.cancel()
                self._setting_up = None
        self._proc = proc  # set up: a job may be launched

    def _set_up_in_thread(self, setup: Callable[[JobProcess], Any],
                          proc: JobProcess) -> asyncio.Future[None]:
        """Start ``setup(proc)`` in a new thread; the future it settles when it returns (unless
        something settled it first: then a failure is logged, not lost)."""
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[None] = loop.create_future()
        extra = self.logging_extra()

        def deliver(error: BaseException | None) -> None:  # on the loop
            if outcome.done():  # abandoned: nobody else hears of it
                if error is not None:
                    logger.error("an abandoned set-up of a hosted job failed",
                                 exc_info=error, extra=extra)
            elif error is None:
                outcome.set_result(None)
            else:
                outcome.set_exception(error)

        def run() -> None:  # in the set-up's thread
            error: BaseException | None = None
            try:
                setup(proc)
            except BaseException as e:  # noqa: BLE001 - handed to the loop, raised there
                error = e
            try:
                loop.call_soon_threadsafe(deliver, error)
            # the loop ended: nobody waits for it any more (asyncio's closed loop raises
            # RuntimeError; trio-asyncio's, between its exit and its close, AttributeError)
            except (RuntimeError, AttributeError):
                if error is not None:
                    logger.error("an abandoned set-up of a hosted job failed",
                                 exc_info=error, extra=extra)

        # the caller's context, as asyncio.to_thread gives it
        threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True,
                         name=f"agents_trio set-up {self._id}").start()
        return outcome

    async def launch_job(self, info: RunningJobInfo) -> None:
        """Start the job ``info`` describes as a task of the calling loop; returns at once.

        Cancellation: nothing to cancel; the job's task is started before it returns.
        """
        self.launch_now(info)

    def launch_now(self, info: RunningJobInfo) -> None:
        """:meth:`launch_job`, in the caller's step (the pool launches in the step its set-up
        ends, so no other step sees it set up and free)."""
        if self._running_job is not None:
            raise RuntimeError("the hosted job already runs a job")
        if self._proc is None or self._ended.is_set():
            raise RuntimeError("the hosted job is not initialized, or closed")
        self._running_job = info
        self._task = asyncio.create_task(self._run(info), name=f"hosted job {info.job.id}")
        # the task's end, however it ends (even cancelled before its first step)
        self._task.add_done_callback(self._on_end)

    async def _run(self, info: RunningJobInfo) -> None:
        await self._entrypoint.run_hosted(info, proc=self._proc,
                                          inference_executor=self._inference_executor)

    def _on_end(self, task: asyncio.Task[None]) -> None:
        # returned, failed, or cancelled; the status is read from the task
        if _failed(task):
            logger.error("the job failed", exc_info=task.exception(),
                         extra=self.logging_extra())
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
        grace) and wait for it; closing it again waits for the same end. An executor without
        a job just closes (a set-up in flight is abandoned: :meth:`initialize` raises).

        Cancellation: only the wait is cancelled; the job still shuts down.
        """
        task = self._task
        if task is None:
            if self._setting_up is not None:
                _settle(self._setting_up,
                        RuntimeError("the hosted job was closed during its set-up"))
            self._end()
            return
        if not self._cancel_sent:
            # the first close cancels the job; a later one (LiveKit's termination, then the
            # pool's close) waits for the same shutdown: a second cancellation would cut the
            # job's grace short and end the executor while its Trio job still shuts down
            # (Task.cancelling(), which would tell, is 3.11's)
            self._cancel_sent = True
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


def _failed(task: asyncio.Task[None]) -> bool:
    """Whether a job's ended task failed (cancelled is not failed: LiveKit ended the job).
    Reading it retrieves the error, so asyncio does not report it as never retrieved."""
    return not task.cancelled() and task.exception() is not None


def _settle(outcome: asyncio.Future[None], error: BaseException) -> None:
    """Settle ``outcome`` with ``error`` unless it is settled already (the first one wins)."""
    if not outcome.done():
        outcome.set_exception(error)


class HostedJobPool(EventEmitter[str]):
    """What LiveKit's ``AgentServer`` needs of its process pool, with :class:`HostedJob`
    executors: ``processes``, ``get_by_job_id``, ``start``, ``launch_job``, ``aclose``,
    the idle target, and its events.

    Every set-up is a task of the pool (``aclose`` cancels them all); one set up for a launch
    launches its job in the step it ends, unless the launch gave up waiting (then it is an
    idle one). The jobs to set up ahead are derived from the executors listed, so no step
    counts one twice (set up and still setting up) or not at all.

    Args:
        num_idle: Jobs set up ahead of their launch (the server's ``num_idle_processes``).
        close_timeout: Seconds :meth:`aclose` waits for the set-ups; the rest is logged.
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
        # each set-up in flight: its executor, and the launch waiting for it, if one does
        self._setups: dict[asyncio.Task[None], tuple[HostedJob, _Launch | None]] = {}
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
        setting_up = self._top_up()
        if setting_up:
            done, _ = await asyncio.wait(setting_up, timeout=self._initialize_timeout + 2)
            if len(done) < len(setting_up):
                logger.warning("timed out setting up the idle hosted jobs")

    async def launch_job(self, info: RunningJobInfo) -> None:
        """Launch ``info`` on an idle job (set one up if none is). Raises what its set-up
        raised, or RuntimeError once the pool is closed (or closes before it is set up).

        Cancellation: while a job is being set up for it, the set-up goes on for an idle
        job; once launched, the job runs on.
        """
        if self._closed:
            raise RuntimeError("the hosted job pool is closed")
        if self._idle:
            self._launch(self._idle.popleft(), info)
        else:
            launch = _Launch(info)
            self._set_up_soon(launch)
            await launch.done  # settled by the set-up (cancelled: it is no launch's any more)
        self._top_up()

    async def aclose(self) -> None:
        """Close every job (cancelled: each session shuts down within its grace) and wait
        for them; end the set-ups in flight (their threads finish on their own) and wait for
        them at most ``close_timeout``. A launch waiting for a set-up fails.

        Cancellation: only the wait is cancelled; the jobs still shut down.
        """
        self._closed = True
        for task in list(self._setups):
            task.cancel()
        # tasks, not gather(): cancelling this wait must leave every job's close running
        closing = [asyncio.ensure_future(e.aclose()) for e in list(self._executors)]
        if closing:
            done, _ = await asyncio.wait(closing)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    logger.error("closing a hosted job failed", exc_info=task.exception())
        if self._setups:
            _, late = await asyncio.wait(list(self._setups), timeout=self._close_timeout)
            if late:
                logger.error("%d hosted job set-ups did not end", len(late))

    # -- internals ------------------------------------------------------------------------------
    def _wanted(self) -> int:
        # spares: listed executors no job runs on and no launch waits for (idle, or being set
        # up for the idle ones); an ended one is unlisted in the step it ends, and a launch's
        # job is launched in the step its set-up ends, so this never counts one twice
        waited_for = {executor for executor, launch in self._setups.values()
                      if launch is not None and not launch.done.done()}
        spares = sum(1 for e in self._executors
                     if e.running_job is None and e not in waited_for)
        return max(0, min(self._target_idle, self._default_idle) - spares)

    def _top_up(self) -> list[asyncio.Task[None]]:
        if self._closed:
            return []
        return [self._set_up_soon(None) for _ in range(self._wanted())]

    def _set_up_soon(self, launch: _Launch | None) -> asyncio.Task[None]:
        # listed from now on (counted by _wanted, closed by aclose), even if the task is
        # cancelled before its first step
        executor = HostedJob(**self._job_options)
        self._executors.append(executor)
        self.emit("process_created", executor)
        task = asyncio.ensure_future(self._set_up(executor, launch))
        self._setups[task] = (executor, launch)
        task.add_done_callback(self._set_up_ended)
        return task

    async def _set_up(self, executor: HostedJob, launch: _Launch | None) -> None:
        """Start and set up ``executor``, then launch the job of ``launch`` on it if it still
        waits, or make it an idle one. A failure goes to the launch, or is logged."""
        try:
            await executor.start()
            self.emit("process_started", executor)
            await executor.initialize()
        except BaseException as e:
            await executor.aclose()  # ends it: dropped and reported by _drop
            if not isinstance(e, Exception):
                raise  # cancelled: the pool closed (_set_up_ended tells the launch)
            if launch is not None and not launch.done.done():
                launch.done.set_exception(e)
            else:
                logger.error("setting up a hosted job failed", exc_info=e,
                             extra=executor.logging_extra())
            return
        self.emit("process_ready", executor)
        if launch is not None and not launch.done.done():
            self._launch(executor, launch.info)
            launch.done.set_result(None)
        else:
            self._idle.append(executor)

    def _set_up_ended(self, task: asyncio.Task[None]) -> None:
        _, launch = self._setups.pop(task)
        if launch is not None:  # a set-up cancelled by aclose (even before its first step)
            _settle(launch.done, RuntimeError("the hosted job pool closed during the set-up"))

    def _launch(self, executor: HostedJob, info: RunningJobInfo) -> None:
        # LiveKit's dispatch timeline field: an epoch timestamp, as its own pool sets it
        info.launched_at = time.time()
        executor.launch_now(info)
        self.emit("process_job_launched", executor)

    def _drop(self, executor: HostedJob) -> None:
        """An executor ended: drop it at once (the server's drain joins every listed job
        with a running job; a join that returns at once must not find it listed again),
        then tell the server."""
        if executor in self._executors:
            self._executors.remove(executor)
        if executor in self._idle:
            self._idle.remove(executor)
        self.emit("process_closed", executor)


class _Launch:
    """A launch waiting for the job set up for it: ``done`` is settled by the set-up (the
    job launched, or why not), or cancelled by the launch giving up."""

    def __init__(self, info: RunningJobInfo) -> None:
        self.info = info
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
