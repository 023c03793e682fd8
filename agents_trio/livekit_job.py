"""LiveKit's own job context inside a Trio job, for plugins that read it.

Two job contexts exist while an entrypoint runs:

- ``agents_trio.get_job_context()`` is this runtime's :class:`~agents_trio.job.JobContext`
  (the bridge, the room, the sessions the job owns). Agent code uses it.
- ``livekit.agents.get_job_context()`` is LiveKit's ``JobContext``. LiveKit's plugins read
  it: ``livekit-plugins-turn-detector``'s ``MultilingualModel()`` / ``EnglishModel()`` take
  its ``inference_executor`` when constructed and later call
  ``executor.do_inference(method, data)`` from asyncio (on this runtime: the bridge's loop).

:func:`open_livekit_job_context` gives every Trio job the second one, for the entrypoint's
task tree: LiveKit's public ``livekit.agents.testing.fake_job_context`` with the job's room,
id and an inference executor usable from the bridge's loop:

- in the packed worker, the inference executor of the job LiveKit dispatched (its client
  to the worker's inference process); it lives on the job thread's asyncio loop, so calls
  cross to that loop (:class:`CrossLoopInferenceExecutor`);
- in ``console`` and ``connect``, where no LiveKit worker runs, LiveKit's own inference
  process (``InferenceProcExecutor``, the registered ``_InferenceRunner`` classes run in a
  child process), when runners are registered (importing the turn-detector plugin registers
  its runners): started on the bridge's loop when a model first asks, closed when the job
  ends.

Without ``livekit-agents`` installed nothing is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import multiprocessing
import sys
from collections.abc import AsyncIterator
from typing import Any, Protocol, cast

import trio

from .io.bridge import AsyncioBridge

__all__ = ["CrossLoopInferenceExecutor", "InferenceExecutor", "InferenceProcess",
           "open_inference_process",
           "open_livekit_job_context", "registered_inference_methods"]

logger = logging.getLogger("agents_trio.livekit_job")

#: LiveKit's bounds for its inference process (worker.py of livekit-agents 1.8.9)
_INITIALIZE_TIMEOUT = 5 * 60.0
_CLOSE_TIMEOUT = 5.0


class InferenceExecutor(Protocol):
    """LiveKit's ``InferenceExecutor`` protocol: one asyncio method."""

    async def do_inference(self, method: str, data: bytes) -> bytes | None:
        """asyncio: run the registered runner ``method`` on ``data``.

        Cancellation: cancelling the asyncio task abandons the request (the runner may
        finish it, its result unused).
        """
        ...


class CrossLoopInferenceExecutor:
    """An inference executor that lives on another thread's asyncio loop, callable from any
    other loop (here: the bridge's).

    Args:
        executor: The executor (LiveKit's ``JobContext.inference_executor`` of a job).
        loop: The loop it belongs to (the job thread's).
    """

    def __init__(self, executor: InferenceExecutor, loop: asyncio.AbstractEventLoop) -> None:
        if not callable(getattr(executor, "do_inference", None)):
            raise TypeError(f"{executor!r} has no do_inference()")
        self.executor = executor
        self.loop = loop

    async def do_inference(self, method: str, data: bytes) -> bytes | None:
        """asyncio: the executor's ``do_inference``, run on its own loop.

        Raises:
            RuntimeError: The executor's loop is closed (the job ended), or the inference
                failed.

        Cancellation: cancelling the caller cancels the call on the executor's loop.
        """
        future = asyncio.run_coroutine_threadsafe(
            self.executor.do_inference(method, data), self.loop)
        # cancelling the wrapper cancels `future`, which cancels the task on the other loop
        return await asyncio.wrap_future(future)

    def __repr__(self) -> str:
        return f"CrossLoopInferenceExecutor({self.executor!r})"


class TrioJob(Protocol):
    """What :func:`open_livekit_job_context` reads of a job
    (:class:`agents_trio.job.JobContext`)."""

    bridge: AsyncioBridge
    job_id: str | None
    inference_executor: InferenceExecutor | None

    @property
    def room(self) -> Any:  # noqa: ANN401 - an rtc.Room or the console's stand-in
        """The job's room."""


def _livekit_agents_installed() -> bool:
    return "livekit.agents" in sys.modules or importlib.util.find_spec("livekit.agents") is not None


def registered_inference_methods() -> list[str]:
    """The inference methods LiveKit's registered runners serve (empty without
    livekit-agents)."""
    if not _livekit_agents_installed():
        return []
    from livekit.agents.inference_runner import _InferenceRunner

    return sorted(_InferenceRunner.registered_runners)


class InferenceProcess:
    """LiveKit's inference process (``InferenceProcExecutor``: a child process running every
    registered ``_InferenceRunner``), started on the first :meth:`do_inference` and closed by
    :meth:`aclose`. Lives on one asyncio loop (the bridge's): call it there.

    Started on first use, not up front: a job that never asks a model (``console --text``:
    no audio, no end-of-turn prediction) spawns no process. The start runs in a task of its
    own, so a first call that times out (LiveKit's turn detector gives a prediction 3 s)
    does not abandon it: the next call finds the process ready. A start that failed fails
    every call with its error.

    Args:
        runners: LiveKit's runners by inference method (default: the registered ones, read
            at the first call).
    """

    def __init__(self, runners: dict[str, type[Any]] | None = None) -> None:
        self.runners = runners
        self._process: Any = None
        self._start: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        """Whether the first call started (or began starting) the process."""
        return self._start is not None

    async def do_inference(self, method: str, data: bytes) -> bytes | None:
        """asyncio: ``method``'s runner on ``data``, in the child process.

        Raises:
            RuntimeError: The process could not start or initialise (e.g. a runner's model
                files are not downloaded), or the inference failed.

        Cancellation: cancelling the caller abandons this request; a start in progress
        goes on.
        """
        if self._start is None:
            self._start = asyncio.get_running_loop().create_task(self._launch(),
                                                                 name="inference process")
        await asyncio.shield(self._start)
        return await self._process.do_inference(method, data)  # type: ignore[no-any-return]

    async def _launch(self) -> None:
        from livekit.agents.inference_runner import _InferenceRunner
        from livekit.agents.ipc.inference_proc_executor import InferenceProcExecutor

        runners = dict(self.runners if self.runners is not None
                       else _InferenceRunner.registered_runners)
        if not runners:
            raise RuntimeError("no inference runner is registered")
        context = "spawn" if not sys.platform.startswith("linux") else "forkserver"
        self._process = InferenceProcExecutor(
            runners=runners, initialize_timeout=_INITIALIZE_TIMEOUT,
            close_timeout=_CLOSE_TIMEOUT, memory_warn_mb=2000, memory_limit_mb=0,
            ping_interval=5, ping_timeout=60, high_ping_threshold=2.5,
            mp_ctx=multiprocessing.get_context(context), loop=asyncio.get_running_loop(),
            http_proxy=None)
        logger.info("starting LiveKit's inference process for %s", ", ".join(sorted(runners)))
        await self._process.start()
        await self._process.initialize()

    async def aclose(self) -> None:
        """asyncio: close the process (a start in progress is awaited first). Idempotent.

        Cancellation: as LiveKit's ``aclose``: bounded by its close timeout, then the child
        is killed.
        """
        if self._start is None:
            return
        await asyncio.wait([self._start])  # its error, if any, went to the callers
        if self._process is not None:
            await self._process.aclose()


@contextlib.asynccontextmanager
async def open_inference_process(bridge: AsyncioBridge) -> AsyncIterator[InferenceProcess]:
    """An :class:`InferenceProcess` for the block (its process starts on first use),
    closed when the block ends.

    Cancellation: leaving the block, cancelled or not, closes the process if it started
    (shielded; LiveKit's close timeout bounds it).
    """
    process = InferenceProcess()
    try:
        yield process
    finally:
        if process.started:
            with trio.CancelScope(shield=True):
                await bridge.run(process.aclose)


@contextlib.asynccontextmanager
async def open_livekit_job_context(ctx: TrioJob) -> AsyncIterator[Any]:
    """LiveKit's job context for the block (what ``livekit.agents.get_job_context()``
    returns in the calling task and the tasks it starts): LiveKit's public
    ``fake_job_context`` with ``ctx``'s room and job id, and as inference executor
    ``ctx.inference_executor`` if set (the packed worker's), else LiveKit's inference
    process started for the block when runners are registered (:func:`open_inference_process`),
    else LiveKit's placeholder that refuses inference.

    Yields:
        LiveKit's ``JobContext``, or None without livekit-agents.

    Cancellation: leaving the block, cancelled or not, unsets the context and closes an
    inference process it started (shielded).
    """
    if not _livekit_agents_installed():
        yield None
        return
    from livekit.agents.testing import fake_job_context

    async with contextlib.AsyncExitStack() as stack:
        given = ctx.inference_executor
        executor = given
        if executor is None and registered_inference_methods():
            executor = await stack.enter_async_context(open_inference_process(ctx.bridge))
        ctx.inference_executor = executor
        try:
            with fake_job_context(room=cast(Any, ctx.room), job_id=ctx.job_id or "fake-job",
                                  inference_executor=cast(Any, executor)) as lk_ctx:
                yield lk_ctx
        finally:
            ctx.inference_executor = given
