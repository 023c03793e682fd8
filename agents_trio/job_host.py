"""One Trio run per process, hosting every LiveKit job of that process.

LiveKit's worker runs each job's entrypoint in an asyncio loop of its own (a thread of the
worker process with the ``THREAD`` job executor, a process of its own with ``PROCESS``). A
:class:`JobHost` is the Trio side those entrypoints hand their work to: one thread running one
``trio.run``, with one asyncio bridge (one trio-asyncio loop for every room and plugin of the
process) and one nursery that owns every job. So a process with a hundred conversations has one
Trio scheduler and one bridge, not a hundred::

    host = process_job_host()           # the process's host, started on first use
    result = await host.run(job_fn)     # from any asyncio loop of the process

:meth:`JobHost.run` is asyncio-flavoured: the caller's loop waits while the Trio job runs.
Cancelling the caller cancels that job alone (a :func:`~agents_trio.job.run_job` job turns it
into a ``job_shutdown`` with its grace), and the caller waits for it at most ``cancel_grace``
seconds before re-raising the cancellation. A job that fails fails only its caller: the error
is handed back, the other jobs go on. Closing the host, at any moment (while it starts
too), cancels every job it still runs and refuses the ones submitted from then on: a refused
job never begins, and its caller gets :class:`JobHostError`.

Load: :meth:`JobHost.load` is the fraction of the last seconds the Trio thread was busy, i.e.
not waiting for I/O in the scheduler (:class:`LoopUtilisation`, a Trio instrument). It is what
the worker reports to LiveKit (``load_fnc``), so dispatch sends new jobs to the processes whose
loop has room. Time waiting for a core (another process has it) or for the GIL counts as busy
when it falls between two waits: the loop could not serve then either.

The collector: while it runs, a host raises the cyclic garbage collector's young threshold
(:func:`~agents_trio.collector.tune_collector_for_sessions`), so that the objects of a turn
die young instead of bringing on full collections, pauses of every job of the process that grow
with their number; ``gc_young_threshold=None`` leaves the collector as it is.

Needs ``trio-asyncio`` (the bridge); imports nothing of ``livekit-agents``.
"""

from __future__ import annotations

import atexit
import collections
import functools
import gc
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import outcome
import trio

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

from ._errors import AgentsTrioError
from .collector import (SESSION_HOST_YOUNG_THRESHOLD, check_young_threshold,
                        tune_collector_for_sessions)
from .io.bridge import AsyncioBridge, TrioResult, open_bridge
from .nurseries import single_leaf

__all__ = ["JobHost", "JobHostError", "LoopUtilisation", "job_host_load", "process_job_host"]

logger = logging.getLogger("agents_trio.job_host")

T = TypeVar("T")


class JobHostError(AgentsTrioError):
    """The job host could not start, or it closed before or while running the job."""


class LoopUtilisation(trio.abc.Instrument):
    """A Trio instrument measuring how busy the run's thread is.

    The scheduler waits for I/O (and timers) between batches of runnable tasks; every other
    moment the thread is running tasks, or would be if it had the CPU. :meth:`load` is the
    busy share of wall time over the last ``window`` seconds (or since the previous reading,
    if that is longer ago). It may be read from any thread.

    The clock is the wall clock (``time.perf_counter``), not Trio's: utilisation is about real
    time whatever clock the run uses, and the reader is another thread.
    """

    def __init__(self, *, window: float = 2.5,
                 clock: Callable[[], float] = time.perf_counter,  # noqa: TID251
                 ) -> None:  # the real clock: load() is read from LiveKit's threads, outside the run
        if not window > 0:
            raise ValueError(f"window must be positive, got {window!r}")
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._mark = clock()
        self._busy = 0.0
        self._waiting = False
        self._history: collections.deque[tuple[float, float]] = collections.deque(
            [(self._mark, 0.0)])

    def before_io_wait(self, timeout: float) -> None:
        now = self._clock()
        with self._lock:
            if not self._waiting:
                self._busy += now - self._mark
            self._mark = now
            self._waiting = True

    def after_io_wait(self, timeout: float) -> None:
        now = self._clock()
        with self._lock:
            self._mark = now
            self._waiting = False

    def busy_seconds(self) -> tuple[float, float]:
        """``(now, seconds busy since the instrument was made)``, counting the current
        stretch."""
        with self._lock:
            now = self._clock()
            return now, self._busy + (0.0 if self._waiting else now - self._mark)

    def load(self) -> float:
        """The busy fraction, 0 to 1, over the last ``window`` seconds."""
        now, busy = self.busy_seconds()
        with self._lock:
            history = self._history
            # keep the newest reading at least a window old as the start of the window
            while len(history) > 1 and history[1][0] <= now - self.window:
                history.popleft()
            start, busy_at_start = history[0]
            if now - history[-1][0] >= self.window / 10:
                history.append((now, busy))
        span = now - start
        if span <= 0:
            return 0.0
        return min(1.0, max(0.0, (busy - busy_at_start) / span))


class _Job(Generic[T]):
    """One submitted job: the result its asyncio caller waits on (the first result counts),
    and the cancel scope the Trio side runs it in."""

    def __init__(self, fn: Callable[[], Awaitable[T]], name: str) -> None:
        self.fn = fn
        self.name = name
        self.result: TrioResult[T] = TrioResult()  # made on the caller's loop
        self.scope = trio.CancelScope()

    def resolve(self, result: outcome.Outcome[T | None]) -> None:
        """In the Trio thread."""
        self.result.resolve(result)


class JobHost:
    """A Trio run in a thread of its own, with one asyncio bridge and one nursery, that runs
    jobs submitted from asyncio code anywhere in the process.

    Args:
        name: The thread's name.
        load_window: Seconds :meth:`load` averages over.
        start_timeout: Seconds :meth:`start` waits for the run to be ready.
        gc_young_threshold: The collector's young threshold while the host runs (see
            :func:`~agents_trio.collector.tune_collector_for_sessions`; restored when it
            closes, unless changed meanwhile); None leaves the collector alone.

    Raises:
        ValueError: ``gc_young_threshold`` is not a positive integer or None.
    """

    def __init__(self, *, name: str = "agents_trio jobs", load_window: float = 2.5,
                 start_timeout: float = 30.0,
                 gc_young_threshold: int | None = SESSION_HOST_YOUNG_THRESHOLD) -> None:
        if gc_young_threshold is not None:
            check_young_threshold(gc_young_threshold, "gc_young_threshold")
        self.name = name
        self.start_timeout = start_timeout
        self.gc_young_threshold = gc_young_threshold
        # the thresholds before the host raised them, and the ones it set
        self._gc_restore: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None
        self.utilisation = LoopUtilisation(window=load_window)
        self.jobs_started = 0
        self.jobs_running = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._failure: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._bridge: AsyncioBridge | None = None
        self._run_token: object = None
        self._closing = False

    # -- lifecycle (any thread) ---------------------------------------------------------------
    def start(self) -> None:
        """Start the Trio run (once; later calls return at once) and wait until it takes jobs.
        Sync and thread-safe: the first caller blocks while the thread starts.

        Raises:
            JobHostError: The run did not start within ``start_timeout``, failed, or closed.
        """
        with self._lock:
            if self._thread is None and not self._closing:
                if self.gc_young_threshold is not None:
                    previous = tune_collector_for_sessions(self.gc_young_threshold)
                    self._gc_restore = previous, gc.get_threshold()
                self._thread = threading.Thread(target=self._thread_main, name=self.name,
                                                daemon=True)
                self._thread.start()
        if not self._ready.wait(self.start_timeout):
            raise JobHostError(f"the job host did not start within {self.start_timeout} s")
        if self._failure is not None:
            raise JobHostError(f"the job host failed: {self._failure!r}") from self._failure
        if self._stopped.is_set() or self._closing:
            raise JobHostError("the job host is closed")

    @property
    def started(self) -> bool:
        return self._ready.is_set() and not self._stopped.is_set()

    @property
    def closed(self) -> bool:
        return self._stopped.is_set()

    @property
    def bridge(self) -> AsyncioBridge:
        """The bridge every job of the host shares (after :meth:`start`)."""
        if self._bridge is None or not self.started:
            raise JobHostError("the job host is not running: call start() first")
        return self._bridge

    @property
    def run_token(self) -> object:
        """The Trio run's token (one per run): jobs of one host see the same one."""
        return self._run_token

    def close(self, timeout: float | None = None) -> None:
        """Cancel every job still running (each gets the shutdown its code gives it), refuse
        later ones, close the bridge and end the thread; wait for it at most ``timeout``
        seconds (None: until it ends). Sync; idempotent; a host never started is just marked
        closed, and one still starting ends as soon as its run is up."""
        with self._lock:
            self._closing = True
            thread = self._thread
            if thread is None:
                self._stopped.set()
                self._ready.set()
                return
            # read under the lock the run publishes them under: either they are here and the
            # run is cancelled below, or the run has yet to publish them and sees the close
            token, nursery = self._token, self._nursery
        if token is not None and nursery is not None:
            try:
                token.run_sync_soon(nursery.cancel_scope.cancel)
            except trio.RunFinishedError:
                pass
        if thread is not threading.current_thread():
            thread.join(timeout)

    def load(self) -> float:
        """How busy the Trio thread was over the last seconds, 0 to 1 (0 before it starts).
        Callable from any thread; what the worker reports to LiveKit."""
        if not self._ready.is_set():
            return 0.0
        return self.utilisation.load()

    # -- jobs (asyncio side) ------------------------------------------------------------------
    async def run(self, async_fn: Callable[..., Awaitable[T]], *args: object,
                  name: str = "job", cancel_grace: float = 10.0) -> T | None:
        """asyncio-flavoured: run ``async_fn(*args)`` as a job of this host (a Trio task in
        its nursery) and wait for it. Starts the host if needed.

        Returns:
            What ``async_fn`` returned; None if it was cancelled.

        Raises:
            JobHostError: The host is closed, or closed while the job ran.
            Whatever ``async_fn`` raised.

        Cancellation:
            Cancelling the awaiting asyncio task cancels this job's Trio scope (the others go
            on), waits for the job to finish at most ``cancel_grace`` seconds, then re-raises
            the cancellation.
        """
        self.start()
        job: _Job[T] = _Job(functools.partial(async_fn, *args), name)
        assert self._token is not None
        try:
            self._token.run_sync_soon(self._spawn, job)
        except trio.RunFinishedError:
            raise JobHostError("the job host is closed") from None
        return await job.result.wait(lambda: self._cancel(job), what=f"job {name!r}",
                                     cancel_grace=cancel_grace)

    def _cancel(self, job: _Job[Any]) -> None:
        assert self._token is not None
        try:
            self._token.run_sync_soon(job.scope.cancel)
        except trio.RunFinishedError:
            pass

    # -- the Trio side --------------------------------------------------------------------------
    def _thread_main(self) -> None:
        try:
            trio.run(self._main, instruments=[self.utilisation])
        except BaseException as e:  # noqa: BLE001 - reported to start() and logged
            self._failure = e
            logger.exception("the job host's Trio run failed")
        finally:
            self._restore_collector()
            self._stopped.set()
            self._ready.set()

    def _restore_collector(self) -> None:
        """Put back the collector's thresholds the host replaced, unless they were changed
        since (by the application, or by another host)."""
        restore, self._gc_restore = self._gc_restore, None
        if restore is not None and gc.get_threshold() == restore[1]:
            gc.set_threshold(*restore[0])

    async def _main(self) -> None:
        async with open_bridge() as bridge, trio.open_nursery() as nursery:
            with self._lock:
                self._bridge = bridge
                self._nursery = nursery
                self._run_token = self._token = trio.lowlevel.current_trio_token()
                if self._closing:  # close() came while the run started: it found no nursery
                    nursery.cancel_scope.cancel()
            self._ready.set()
            await trio.sleep_forever()

    def _spawn(self, job: _Job[Any]) -> None:
        assert self._nursery is not None
        try:
            # a closing host's nursery (cancelled) still takes it: its first step ends it
            self._nursery.start_soon(self._run_job, job, name=job.name)
        except RuntimeError:  # the nursery is closed: the host is shutting down
            job.resolve(outcome.Error(JobHostError("the job host is closed")))

    async def _run_job(self, job: _Job[Any]) -> None:
        self.jobs_started += 1
        self.jobs_running += 1
        # unless replaced below: the host's own cancellation is unwinding through the job
        result: outcome.Outcome[Any] = outcome.Error(
            JobHostError("the job host closed while the job ran"))
        try:
            with job.scope:
                # a job whose host began closing (or whose caller gave up) before it began
                # never begins (it would run up to its first checkpoint): it is ended here
                await trio.lowlevel.checkpoint_if_cancelled()
                result = outcome.Value(await job.fn())
            if job.scope.cancelled_caught:  # cancelled by its caller
                result = outcome.Value(None)
        except Exception as e:  # noqa: BLE001 - the job's error goes to its caller
            # taken after the job's scope, which took its own cancellation out of a group
            # of that and the job's errors (a job failing as it is cancelled)
            result = outcome.Error(single_leaf(e))
        except BaseExceptionGroup as group:
            # the job's errors with the host's cancellation: the errors go to the caller,
            # the cancellation on to the host's nursery; neither ends the other jobs
            errors, cancellation = group.split(Exception)
            if errors is not None:
                result = outcome.Error(single_leaf(errors))
            if cancellation is not None:
                raise cancellation from None
        finally:
            # counted out before its caller hears of the end
            self.jobs_running -= 1
            job.resolve(result)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "running" if self.started else "not started"
        return f"<JobHost {self.name!r} {state}, {self.jobs_running} jobs>"


_process_host: JobHost | None = None
_process_lock = threading.Lock()


def process_job_host() -> JobHost:
    """The process's job host (made on first use, not started; replaced once closed). It is
    closed at interpreter exit."""
    global _process_host
    with _process_lock:
        if _process_host is None or _process_host.closed:
            _process_host = JobHost()
            atexit.register(_process_host.close, 10.0)
        return _process_host


def job_host_load() -> float:
    """The process job host's :meth:`~JobHost.load` (a LiveKit ``load_fnc``)."""
    return process_job_host().load()
