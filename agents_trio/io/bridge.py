"""The asyncio bridge: the only module of agents_trio that imports ``asyncio`` and ``trio_asyncio``.

The LiveKit SDK (rooms, tracks, ``AudioSource``, ``AudioStream``) and every LiveKit Agents plugin
are asyncio code. :func:`open_bridge` runs a trio-asyncio loop inside the caller's Trio task
tree, so that code runs in the same thread as the Trio runtime, on Trio's clock, and is owned
by the ``async with`` block that opened it::

    async with open_bridge() as bridge:
        source = await bridge.run_sync(rtc.AudioSource, 24000, 1)    # binds to the loop
        await bridge.run(source.capture_frame, frame)                 # an asyncio coroutine
        async with bridge.open_receive_channel(stream) as frames:     # asyncio iterator -> Trio
            async for frame in frames: ...

What crosses the boundary, and how:

- :meth:`AsyncioBridge.run` runs an asyncio coroutine function as an asyncio task and waits for
  it. :meth:`~AsyncioBridge.run_sync` runs a plain function inside the loop (use it to create
  SDK objects: they bind to the running loop when constructed, and some start asyncio tasks).
  :meth:`~AsyncioBridge.call_soon` schedules a plain function without waiting.
- :meth:`~AsyncioBridge.open_receive_channel` turns an asyncio async iterable into a Trio
  channel; :meth:`~AsyncioBridge.open_send_channel` feeds Trio items to an asyncio consumer;
  both are bounded (backpressure) and hand items over in batches.
  :meth:`~AsyncioBridge.callback_channel` turns asyncio callbacks (event emitters) into a Trio
  channel. :class:`BridgeFeeder` hands items to a sync function inside the loop (e.g.
  ``push_frame`` of a plugin stream), one loop callback for everything fed since the last ran.
- :func:`run_trio_in_thread` goes the other way: asyncio code (LiveKit's job process) runs a
  Trio function in its own thread and cancels it when the asyncio task is cancelled.

Cancellation, and where the two worlds differ:

- **Trio cancels asyncio, and waits.** Cancelling the Trio caller of :meth:`~AsyncioBridge.run`
  cancels the asyncio task (``task.cancel()``) and then waits for it to finish its cleanup,
  shielded, for at most ``cancel_grace`` seconds. A task that ignores cancellation longer is
  abandoned (logged with its name and coroutine, counted in
  :attr:`BridgeStatistics.abandoned_tasks`, cancelled again when the bridge closes) rather
  than hanging the Trio side.
- **asyncio cancellation is edge-triggered, Trio's is level-triggered.** asyncio throws one
  ``CancelledError`` that the coroutine may catch and swallow, even returning a value. The
  bridge does not let that undo a Trio cancellation: if the caller's scope was cancelled, the
  call raises ``trio.Cancelled`` whatever the task returned. If the task failed with another
  exception while being cancelled, that exception is raised instead, so failures are never lost.
- **asyncio cancelling itself has no Trio meaning.** A task cancelled from the asyncio side
  (``task.cancel()`` by SDK code, the loop shutting down) while the Trio caller was not
  cancelled raises :class:`BridgeError`, never a bare ``asyncio.CancelledError`` (a
  ``BaseException`` that Trio code would not expect).
- **Trio shields do not reach into asyncio.** A shielded Trio scope keeps the Trio caller
  waiting, but asyncio code can still be cancelled by asyncio (``asyncio.wait_for``, the SDK);
  ``asyncio.shield`` likewise does not protect against a Trio cancel, which cancels the task
  awaiting the shield.
- **Sync calls cannot be interrupted.** :meth:`~AsyncioBridge.run_sync` is a checkpoint before
  the call is scheduled; once scheduled, the function runs to completion in the loop's next
  turn and its result is returned even if the caller was cancelled meanwhile (the next
  checkpoint raises).
- **Callbacks cannot wait.** An event emitter calls its handlers synchronously, so a callback
  channel is unbounded: backpressure exists for iterators and send channels only.
- **Closing the loop cancels what is left, within the grace.** Leaving :func:`open_bridge`
  cancels every asyncio task still running on its loop (and, round after round, the tasks
  they start while unwinding), then finalizes the async generators they left suspended (as
  ``asyncio.run`` does), waiting shielded for all of it at most ``cancel_grace`` seconds in
  all. Whatever still runs then refuses to stop (asyncio lets a coroutine catch
  ``CancelledError`` and await again) and is *abandoned*: logged as a warning naming the task
  and its coroutine, counted, and its coroutine closed (``GeneratorExit`` at its ``await``, so
  its ``finally`` blocks run at once, as the garbage collector would run them later). The task
  is also taken out of the loop's registry of tasks, because trio-asyncio's own shutdown waits,
  shielded and without a bound, for every task it knows. So the block is left within
  ``cancel_grace`` plus a few loop turns, even under ``trio.fail_after``, whatever asyncio code
  does. Close SDK objects (``aclose``) before leaving: abandoned work releases nothing it
  needed to ``await`` for.
- **Time is Trio's.** The loop's ``time()`` is ``trio.current_time()``, so ``asyncio.sleep``
  and ``call_later`` follow a ``trio.testing.MockClock``. The SDK's native threads do not:
  tests that move real audio through the SDK must run on the real clock.
- **Any executor works.** ``loop.run_in_executor(executor, fn)`` accepts any
  ``concurrent.futures.Executor`` (trio-asyncio's own loop accepts only its ``TrioExecutor``):
  the job is submitted to that executor, so it runs in the executor's threads, and its future
  is chained to an asyncio future of the loop. Its error is the future's error; cancelling the
  future cancels a job not yet started (a started one runs to its end, as in asyncio).
  ``set_default_executor`` likewise accepts any executor. LiveKit's ``AudioStreamDecoder``
  (mp3/ogg from hosted TTS) and ``inference.VAD`` need this.
- **Short jobs may stay on the loop.** Inside :func:`executor_jobs_on_loop` (and in the asyncio
  tasks created there), ``run_in_executor(None, fn)`` runs ``fn`` as a loop callback instead of
  in a thread: the plugin adapters use it for per-window model inference that costs less than
  a thread round trip.
- **Ready callbacks run in batches.** The loop runs up to ``CALLBACKS_PER_STEP`` ready asyncio
  callbacks per Trio scheduling step (trio-asyncio alone runs one), in their order, then lets
  Trio run: a hop of asyncio code no longer waits for a full Trio round each. ``call_soon``
  queues C-level callbacks (task wakeups, future callbacks) without trio-asyncio's per-call
  coroutine-function check, which cannot match them.
- **Unhandled loop errors are logged, not raised.** trio-asyncio's default handler re-raises
  "task exception was never retrieved" into the loop, which would tear down every session on
  it; the bridge logs them and counts them in :attr:`BridgeStatistics.loop_errors`.

Note: ``trio_asyncio`` is imported when the first bridge opens, not when this module is
imported. Importing it replaces asyncio's loop factory for the whole process
(``asyncio.new_event_loop`` then makes trio-asyncio loops), which would change plain asyncio
programs running in the same process — LiveKit's worker, the benchmarks' asyncio runtime.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import dataclasses
import inspect
import logging
import math
import threading
import types
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Generic, TypeVar

import outcome
import trio

from .._errors import AgentsTrioError
from ..nurseries import open_unwrapping_nursery, unwrap_single_error

__all__ = [
    "AsyncioBridge", "BridgeError", "BridgeFeeder", "BridgeReceiveChannel", "BridgeSendChannel",
    "BridgeStatistics", "current_bridge", "executor_jobs_on_loop", "is_asyncio_cancellation",
    "open_bridge", "plain_asyncio_in_this_thread", "run_trio_in_thread", "TrioResult",
]

logger = logging.getLogger("agents_trio.bridge")

T = TypeVar("T")

_current: contextvars.ContextVar[AsyncioBridge | None] = contextvars.ContextVar(
    "agents_trio_bridge", default=None)

_jobs_on_loop: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "agents_trio_executor_jobs_on_loop", default=False)

# Ready asyncio callbacks run per Trio scheduling step (see _run_callbacks_in_batches).
CALLBACKS_PER_STEP = 16

# The bridge's own per-frame loop callbacks (functions of methods, added in their classes):
# never coroutine functions, so queued without trio-asyncio's check (see _cheap_call_soon).
_PLAIN_METHODS: set[Callable[..., object]] = set()


class BridgeError(AgentsTrioError):
    """The asyncio side ended in a way that has no Trio meaning: an asyncio task cancelled
    from the asyncio side, a closed bridge, or no bridge open at all."""


@dataclasses.dataclass(frozen=True)
class BridgeStatistics:
    """Counters of one bridge, for tests and benchmarks (see :meth:`AsyncioBridge.statistics`).

    A *hop* is one crossing that schedules work on the other side: an asyncio task or loop
    callback started from Trio, or a Trio task woken from asyncio.

    Attributes:
        calls: Coroutines run with ``run`` (one asyncio task each).
        sync_calls: Functions run with ``run_sync`` (one loop callback each).
        callbacks: Loop callbacks scheduled by ``call_soon`` and feeders.
        fed_items: Items handed to feeders (``fed_items / callbacks`` is their batching).
        trio_wakeups: Times asyncio code woke a Trio task waiting on a bridge channel.
        asyncio_wakeups: Times Trio code woke an asyncio pump waiting on a bridge channel.
        items_to_trio: Items delivered by receive and callback channels.
        items_to_asyncio: Items delivered by send channels.
        batches_to_asyncio: Consumer calls of send channels (each gets a list of items).
        callback_errors: Exceptions raised by ``call_soon`` callbacks and feeders (logged).
        loop_errors: Errors reported to the loop's exception handler (logged).
        abandoned_tasks: asyncio tasks that ignored cancellation beyond ``cancel_grace`` (each
            counted once, whether a ``run`` or the bridge's closing gave up on it).
        asyncio_tasks: asyncio tasks currently alive on the loop.
    """

    calls: int = 0
    sync_calls: int = 0
    callbacks: int = 0
    fed_items: int = 0
    trio_wakeups: int = 0
    asyncio_wakeups: int = 0
    items_to_trio: int = 0
    items_to_asyncio: int = 0
    batches_to_asyncio: int = 0
    callback_errors: int = 0
    loop_errors: int = 0
    abandoned_tasks: int = 0
    asyncio_tasks: int = 0


class _Counters:
    calls = sync_calls = callbacks = fed_items = trio_wakeups = asyncio_wakeups = 0
    items_to_trio = items_to_asyncio = batches_to_asyncio = callback_errors = loop_errors = 0
    abandoned_tasks = 0

    def __init__(self) -> None:
        for field in dataclasses.fields(BridgeStatistics):
            setattr(self, field.name, 0)


class _Link:
    """What the bridge's channels and feeders use of their bridge."""

    __slots__ = ("bridge", "counters", "loop")

    def __init__(self, bridge: AsyncioBridge, loop: asyncio.AbstractEventLoop,
                 counters: _Counters) -> None:
        self.bridge = bridge
        self.loop = loop
        self.counters = counters


def current_bridge() -> AsyncioBridge:
    """The innermost bridge opened by this task or an ancestor.

    Raises:
        BridgeError: No bridge is open here.
    """
    bridge = _current.get()
    if bridge is None or bridge.closed:
        raise BridgeError("no asyncio bridge is open: wrap the code in "
                          "`async with agents_trio.open_bridge():`")
    return bridge


@asynccontextmanager
async def open_bridge(*, cancel_grace: float = 5.0) -> AsyncIterator[AsyncioBridge]:
    """Open a trio-asyncio loop owned by the ``async with`` block.

    The bridge is also the *current* bridge of the block (see :func:`current_bridge`), which
    the plugin adapters use when they are not given one.

    Args:
        cancel_grace: Seconds a cancelled asyncio task may take to finish its cleanup before
            the Trio side stops waiting for it.

    Raises:
        Whatever the body raises; a single exception is unwrapped from the loop's internal
        nurseries, so no ``ExceptionGroup`` escapes for one error.

    Cancellation:
        Owns the loop. Leaving the block cancels every asyncio task still running on it and
        waits for them, shielded, at most ``cancel_grace`` seconds in all; tasks still running
        then are abandoned: logged, counted, and their coroutines closed (see the module
        docstring). So the block is left within ``cancel_grace`` (plus the loop's own
        shutdown, a few loop turns) even when asyncio code swallows its cancellation.
    """
    import trio_asyncio

    with unwrap_single_error():
        async with trio_asyncio.open_loop() as loop:
            bridge = AsyncioBridge(loop, cancel_grace=cancel_grace)
            _accept_any_executor(loop)
            _run_callbacks_in_batches(loop)
            _cheap_call_soon(loop)
            token = _current.set(bridge)
            try:
                yield bridge
            finally:
                _current.reset(token)
                await bridge.aclose()


def _accept_any_executor(loop: asyncio.AbstractEventLoop) -> None:
    """Make the trio-asyncio ``loop`` run jobs on any ``concurrent.futures.Executor``.

    trio-asyncio's ``run_in_executor`` accepts only its own ``TrioExecutor`` (it asserts), and
    its ``set_default_executor`` ignores any other. LiveKit code passes its own executors
    (``AudioStreamDecoder``'s decoding thread, ``inference.VAD``'s inference thread), so the
    loop's two methods are replaced on this loop object: a foreign executor gets the job by
    ``submit`` (its threads stay its threads) and the ``concurrent.futures.Future`` is chained
    to an asyncio future of the loop, as asyncio's own loops do. ``None`` and ``TrioExecutor``
    keep trio-asyncio's path (``trio.to_thread``), unless a foreign default was set.

    Cancellation and errors: the job's exception is the asyncio future's exception (so the
    awaiting task, and a Trio ``bridge.run`` caller, gets it); cancelling the asyncio future
    cancels the job if it has not started (a started job runs to its end, as in asyncio, and
    its result is dropped). A job finishing after the loop closed is ignored.
    """
    import trio_asyncio

    native_run = loop.run_in_executor
    native_set_default = loop.set_default_executor
    default: list[concurrent.futures.Executor] = []

    def run_in_executor(executor: concurrent.futures.Executor | None,
                        func: Callable[..., T], *args: object) -> asyncio.Future[T]:
        if executor is None and _jobs_on_loop.get():
            return _job_on_loop(loop, func, args)
        if executor is None and default:
            executor = default[0]
        if executor is None or isinstance(executor, trio_asyncio.TrioExecutor):
            return native_run(executor, func, *args)
        if loop.is_closed():
            raise RuntimeError("the bridge's asyncio loop is closed")
        return _chain_job(loop, executor.submit(func, *args))

    def set_default_executor(executor: concurrent.futures.Executor) -> None:
        if isinstance(executor, trio_asyncio.TrioExecutor):
            default.clear()
            native_set_default(executor)
        elif isinstance(executor, concurrent.futures.Executor):
            default[:] = [executor]
        else:
            raise TypeError(f"executor must be a concurrent.futures.Executor, not {executor!r}")

    # Note: instance attributes shadow the loop class's methods for this loop only; trio-asyncio
    # offers no other way (open_loop builds its own TrioEventLoop).
    setattr(loop, "run_in_executor", run_in_executor)
    setattr(loop, "set_default_executor", set_default_executor)


@contextmanager
def executor_jobs_on_loop() -> Iterator[None]:
    """Inside the block, jobs for the loop's default executor run on the loop itself.

    Meant for asyncio code the bridge runs (a ``run_sync`` function creating a plugin stream):
    asyncio tasks created inside the block keep the setting for their whole life (they copy
    the context when created), so ``loop.run_in_executor(None, fn, *args)`` from them runs
    ``fn(*args)`` as a loop callback in the Trio thread, in order with other callbacks, instead
    of a round trip through a thread. An explicit executor is still used as given.

    For short CPU work handed over once per audio window (Silero's ONNX inference, ~0.2 ms
    per 32 ms): the thread round trip (hand-off, wakeups, the GIL) costs the process more CPU
    than the work itself. Blocking I/O or long jobs must keep their executor.

    The job's error is the future's error; cancelling the future before the callback ran
    means the job never runs (as an executor job not yet started).
    """
    token = _jobs_on_loop.set(True)
    try:
        yield
    finally:
        _jobs_on_loop.reset(token)


def _job_on_loop(loop: asyncio.AbstractEventLoop, func: Callable[..., T],
                 args: tuple[object, ...]) -> asyncio.Future[T]:
    """An asyncio future of ``func(*args)`` run as a loop callback (see
    ``executor_jobs_on_loop``)."""
    job = _LoopJob(loop.create_future(), func, args)
    loop.call_soon(job.run)
    return job.future


class _LoopJob(Generic[T]):
    """An executor job run as a loop callback (``run``), settling ``future``."""

    __slots__ = ("args", "func", "future")

    def __init__(self, future: asyncio.Future[T], func: Callable[..., T],
                 args: tuple[object, ...]) -> None:
        self.future = future
        self.func = func
        self.args = args

    def run(self) -> None:
        future = self.future
        if future.cancelled():
            return
        try:
            result = self.func(*self.args)
        except Exception as error:
            future.set_exception(error)
        else:
            future.set_result(result)

    _PLAIN_METHODS.add(run)   # queued without the coroutine check (_cheap_call_soon)


def _run_callbacks_in_batches(loop: asyncio.AbstractEventLoop) -> None:
    """Make the trio-asyncio ``loop`` run up to ``CALLBACKS_PER_STEP`` ready callbacks per
    Trio scheduling step instead of one.

    trio-asyncio's loop is a Trio task that takes one asyncio callback (a task step, a
    ``call_soon``) from its queue per iteration, with a Trio checkpoint each time: every hop of
    asyncio code (a frame pushed into a plugin stream, the stream's task waking, its event
    reaching the pump) waits for a full round of the Trio scheduler and costs ~10 µs of
    scheduling. Here, after the callback the loop waited for, the callbacks ready then, and
    those they schedule, run in the same step, up to the bound; then the loop checkpoints, so
    asyncio code that keeps scheduling itself cannot starve Trio. The order of callbacks is
    unchanged (one FIFO queue).

    Note: this replaces a private method of trio-asyncio's loop on this loop object (the only
    way: ``open_loop`` builds its own loop); with a trio-asyncio without it, the loop keeps its
    own pace.
    """
    step = getattr(loop, "_main_loop_one", None)
    if step is None:
        return

    async def run_batch(no_wait: bool = False) -> None:
        await step(no_wait)
        try:
            for _ in range(CALLBACKS_PER_STEP - 1):
                await step(True)   # takes a ready callback without waiting, or raises
        except trio.WouldBlock:
            pass

    setattr(loop, "_main_loop_one", run_batch)


# Callables that cannot be coroutine functions: what asyncio's own machinery schedules
# (a task's wakeup and step, a future's callbacks are C methods); also _PLAIN_METHODS.
_PLAIN_CALLBACK_TYPES = (types.BuiltinMethodType, types.BuiltinFunctionType,
                         types.MethodWrapperType)


def _cheap_call_soon(loop: asyncio.AbstractEventLoop) -> None:
    """Make the trio-asyncio ``loop``'s ``call_soon`` skip its coroutine-function check for
    callbacks that cannot be one.

    trio-asyncio checks every callback (``_check_callback``, which asyncio itself does only in
    debug mode) with ``inspect``: a few microseconds on each of the half a dozen asyncio hops
    an audio window takes through a plugin stream. A C-level callable (a task's wakeup, a
    future's ``set_result``) is never a coroutine function, nor are the bridge's own per-frame
    callbacks (a feeder's drain, a job on the loop), so those are queued directly; anything
    else goes through the loop's own ``call_soon`` and its check, unchanged.

    Note: this replaces ``call_soon`` on this loop object and queues through trio-asyncio's
    ``_queue_handle`` (the method its own ``call_soon`` ends in); with a trio-asyncio without
    it, the loop keeps its own ``call_soon``.
    """
    native = loop.call_soon
    queue_handle: Callable[[asyncio.Handle], asyncio.Handle] | None = getattr(
        loop, "_queue_handle", None)
    if queue_handle is None:
        return
    handle_type = asyncio.Handle

    def call_soon(callback: Callable[..., object], *args: object,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        kind = type(callback)
        if kind in _PLAIN_CALLBACK_TYPES or (
                kind is types.MethodType
                and callback.__func__ in _PLAIN_METHODS):  # type: ignore[attr-defined]
            return queue_handle(handle_type(callback, args, loop, context=context))
        return native(callback, *args, context=context)

    setattr(loop, "call_soon", call_soon)


def _chain_job(loop: asyncio.AbstractEventLoop,
               job: concurrent.futures.Future[T]) -> asyncio.Future[T]:
    """An asyncio future of ``loop`` following the executor ``job`` (see
    ``_accept_any_executor``)."""
    future: asyncio.Future[T] = loop.create_future()

    def settle(done: concurrent.futures.Future[T]) -> None:  # in the loop
        if future.done():
            return
        if done.cancelled():
            future.cancel()
        elif (error := done.exception()) is not None:
            future.set_exception(error)
        else:
            future.set_result(done.result())

    def on_job_done(done: concurrent.futures.Future[T]) -> None:  # in the executor's thread
        if loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(settle, done)
        except (RuntimeError, trio.RunFinishedError):  # the loop closed meanwhile
            pass

    def on_future_done(done: asyncio.Future[T]) -> None:  # in the loop
        if done.cancelled():
            job.cancel()

    future.add_done_callback(on_future_done)
    job.add_done_callback(on_job_done)
    return future


class AsyncioBridge:
    """A running trio-asyncio loop; create it with :func:`open_bridge`.

    Attributes:
        cancel_grace: Seconds a cancelled asyncio task may take to finish.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, *, cancel_grace: float = 5.0) -> None:
        self._loop = loop
        self.cancel_grace = cancel_grace
        self._counters = _Counters()
        self._link = _Link(self, loop, self._counters)
        self._closed = False
        self._abandoned: weakref.WeakSet[asyncio.Future[object]] = weakref.WeakSet()
        loop.set_exception_handler(self._on_loop_error)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The asyncio loop (for SDK constructors that take ``loop=``)."""
        return self._loop

    @property
    def closed(self) -> bool:
        return self._closed

    def statistics(self) -> BridgeStatistics:
        """A snapshot of the bridge's counters (see :class:`BridgeStatistics`)."""
        values = vars(self._counters).copy()
        values["asyncio_tasks"] = 0 if self._loop.is_closed() else sum(
            1 for t in asyncio.all_tasks(self._loop) if not t.done())
        return BridgeStatistics(**values)

    def _check_open(self) -> None:
        if self._closed:
            raise BridgeError("the asyncio bridge is closed")

    def _pending_tasks(self) -> list[asyncio.Task[Any]]:
        return [t for t in asyncio.all_tasks(self._loop) if not t.done()]

    async def aclose(self) -> None:
        """Close the bridge: cancel the tasks left on the loop and finalize its async
        generators, within ``cancel_grace`` in all; abandon whatever still runs then.

        :func:`open_bridge` calls it when its block is left; calling it earlier closes the
        bridge early (later calls do nothing). The loop itself closes with the block.

        Cancellation: shielded and bounded; it runs while the ``open_bridge`` block is left,
        possibly because its caller was cancelled, and must neither be cut short nor hang.
        """
        if self._closed:
            return
        self._closed = True
        deadline = trio.current_time() + self.cancel_grace
        with trio.CancelScope(shield=True, deadline=deadline):
            await self._cancel_tasks()
        # As asyncio.run does, after the tasks: the async generators they left suspended get
        # their aclose(). Started even when the grace is spent (its first step runs in the
        # next loop turn) so that trio-asyncio's own finalization, which waits without a
        # bound, finds no generator left.
        finalizer = self._loop.create_task(self._loop.shutdown_asyncgens(),
                                           name="bridge: finalize async generators")
        with trio.CancelScope(shield=True):
            await self._loop_turn()
        with trio.CancelScope(shield=True, deadline=deadline):
            await _wait_done(finalizer)
            await self._cancel_tasks()
        with trio.CancelScope(shield=True):
            while stubborn := self._pending_tasks():
                # Closing a coroutine runs its finally blocks, which may start new tasks: they
                # get no grace, the grace is spent.
                await self._in_loop(self._abandon, stubborn)

    async def _cancel_tasks(self) -> None:
        # Tasks started by tasks unwinding are cancelled in the next round; no round starts
        # once the grace is spent.
        while (left := self._pending_tasks()) and (
                trio.current_effective_deadline() > trio.current_time()):
            if logger.isEnabledFor(logging.DEBUG):  # names only: a record keeps its arguments
                logger.debug("closing the bridge cancels %d asyncio task(s): %s", len(left),
                             ", ".join(_describe(t) for t in left))
            for task in left:
                task.cancel()
            for task in left:
                await _wait_done(task)

    async def _in_loop(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` as a loop callback and wait for it, even on a closed bridge."""
        done = trio.Event()

        def invoke() -> None:
            try:
                fn(*args)
            finally:
                done.set()

        self._loop.call_soon(invoke)
        await done.wait()

    async def _loop_turn(self) -> None:
        """Wait until the callbacks scheduled so far ran."""
        await self._in_loop(lambda: None)

    def _count_abandoned(self, task: asyncio.Future[Any], reason: str) -> None:
        if task not in self._abandoned:
            self._abandoned.add(task)
            self._counters.abandoned_tasks += 1
        logger.warning("abandoned asyncio work %s: %s", _describe(task), reason)

    def _abandon(self, tasks: list[asyncio.Task[Any]]) -> None:
        """A loop callback: stop running ``tasks`` for good, whatever their coroutines want."""
        for task in tasks:
            self._count_abandoned(task, f"still running after the bridge's "
                                        f"{self.cancel_grace:.1f} s of closing grace; its "
                                        "coroutine is closed")
            coro = task.get_coro()
            try:
                # GeneratorExit at its await point: its finally blocks and context managers run
                # now, as when the garbage collector finalizes it after the loop closed.
                coro.close()
            except Exception as error:
                # Note: neither the error nor its traceback in the record: they would keep the
                # abandoned frames alive as long as the record.
                logger.warning("the abandoned %s %s while being closed: %s", _describe(task),
                               "awaited again" if _suspended(coro) else "failed", repr(error))
            # Note: the task itself cannot be finished: it waits on what its coroutine awaited,
            # which may never complete (a gather of other stubborn tasks). The loop's shutdown
            # waits for every task it knows, so the task is taken out of the loop's registry
            # (a private asyncio function, present in every supported Python). It is cancelled
            # too, which usually completes it in the next turn (with an error, retrieved here:
            # it was reported above).
            _forget_task(task)
            task.add_done_callback(_retrieve)
            task.cancel()

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]
                       ) -> None:
        self._counters.loop_errors += 1
        logger.error("asyncio error on the bridge loop: %s", context.get("message"),
                     exc_info=context.get("exception"))

    # -- calls --------------------------------------------------------------------------------
    async def run(self, async_fn: Callable[..., Awaitable[T]], *args: object,
                  **kwargs: object) -> T:
        """Run ``await async_fn(*args, **kwargs)`` as an asyncio task and return its result.

        ``async_fn`` is called inside the asyncio task, so code that runs before its first
        ``await`` sees the running loop.

        Raises:
            BridgeError: The task was cancelled from the asyncio side, or the bridge is closed.
            Exception: Whatever the coroutine raised.

        Cancellation:
            A checkpoint. Cancelling the caller cancels the asyncio task and waits (shielded,
            at most ``cancel_grace``) for it to finish; then ``trio.Cancelled`` is raised, or
            the task's own error if it failed while unwinding.
        """
        self._check_open()
        await trio.lowlevel.checkpoint_if_cancelled()
        self._counters.calls += 1

        async def invoke() -> T:
            return await async_fn(*args, **kwargs)

        name = f"bridge.run({getattr(async_fn, '__qualname__', repr(async_fn))})"
        return await self._wait(self._loop.create_task(invoke(), name=name))

    async def _wait(self, task: asyncio.Future[T]) -> T:
        done = trio.Event()
        task.add_done_callback(lambda _: done.set())
        try:
            await done.wait()
        except trio.Cancelled:
            task.cancel()
            with trio.move_on_after(self.cancel_grace, shield=True):
                await done.wait()
            if not task.done():
                self._count_abandoned(task, f"it ignored cancellation for "
                                            f"{self.cancel_grace:.1f} s; left running until "
                                            "the bridge closes")
            elif not task.cancelled() and (error := task.exception()) is not None:
                raise error from error.__cause__
            raise
        return _result(task)

    async def run_sync(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """Run the plain function ``fn(*args, **kwargs)`` inside the loop and return its result.

        Use it to create SDK objects (``rtc.Room()``, ``rtc.AudioSource(...)``, a plugin's
        ``stream()``): they bind to the running loop, and some start asyncio tasks.

        Cancellation:
            A checkpoint before ``fn`` is scheduled; after that ``fn`` runs to completion and
            its result is returned.
        """
        self._check_open()
        await trio.lowlevel.checkpoint_if_cancelled()
        self._counters.sync_calls += 1
        done = trio.Event()
        box: list[outcome.Outcome[T]] = []

        def invoke() -> None:
            box.append(outcome.capture(fn, *args, **kwargs))
            done.set()

        self._loop.call_soon(invoke)
        with trio.CancelScope(shield=True):
            await done.wait()
        return box[0].unwrap()

    def call_soon(self, fn: Callable[..., object], *args: object) -> None:
        """Schedule ``fn(*args)`` in the loop without waiting (FIFO with other callbacks).

        Exceptions are logged and counted, never raised. Not a checkpoint.
        """
        self._check_open()
        self._counters.callbacks += 1
        self._loop.call_soon(self._guarded, fn, args)

    def _guarded(self, fn: Callable[..., object], args: tuple[object, ...]) -> None:
        try:
            fn(*args)
        except Exception:
            self._counters.callback_errors += 1
            logger.exception("callback %r failed on the bridge loop", fn)

    def feeder(self, fn: Callable[[Any], Any]) -> BridgeFeeder[Any]:
        """A :class:`BridgeFeeder` handing items to ``fn`` inside the loop."""
        return BridgeFeeder(self._link, fn)

    # -- channels -----------------------------------------------------------------------------
    @asynccontextmanager
    async def open_receive_channel(
            self, source: AsyncIterable[Any] | Callable[[], AsyncIterable[Any]], *,
            max_buffer_size: int = 64,
            map_error: Callable[[BaseException], BaseException] | None = None,
    ) -> AsyncIterator[BridgeReceiveChannel[Any]]:
        """Iterate the asyncio async iterable ``source`` into a Trio channel.

        ``source`` may also be a plain function returning the iterable; it is then called
        inside the loop. An asyncio task (the *pump*) reads ``source`` and stops reading while
        ``max_buffer_size`` items wait for the Trio side (backpressure). The iterator's end
        is the channel's end; its error is raised by the channel's ``receive``, once, through
        ``map_error`` if given.

        Raises:
            ValueError: ``max_buffer_size`` is below 1.

        Cancellation:
            Owns the pump. Leaving the block closes the channel (receives still waiting in
            other tasks raise ``trio.ClosedResourceError``), cancels the pump and waits for it;
            an async generator ``source`` is closed. A pump that stops before its source
            ended (cancelled with the block's scope while the body, shielded, still receives;
            cancelled from the asyncio side as the bridge closes) ends the channel with a
            ``BridgeError``.
        """
        self._check_open()
        channel: BridgeReceiveChannel[Any] = BridgeReceiveChannel(
            self._link, max_buffer_size=max_buffer_size, map_error=map_error)
        async with self._pumping(channel, lambda: channel.run_pump(source)):
            yield channel

    def callback_channel(self, convert: Callable[..., object] | None = None
                         ) -> tuple[Callable[..., None], BridgeReceiveChannel[Any]]:
        """A plain callback and the Trio channel it feeds.

        Each call ``callback(*args)`` puts ``convert(*args)`` (default: ``args`` as a tuple,
        or the single argument) into the channel, from asyncio or Trio code. Callbacks cannot
        wait, so the channel is unbounded; ``channel.close_source()`` ends it.
        """
        channel: BridgeReceiveChannel[Any] = BridgeReceiveChannel(
            self._link, max_buffer_size=math.inf, map_error=None)
        return channel.producer_callback(convert), channel

    @asynccontextmanager
    async def open_send_channel(
            self, consumer: Callable[[list[Any]], Any], *, max_buffer_size: int = 16,
            map_error: Callable[[BaseException], BaseException] | None = None,
    ) -> AsyncIterator[BridgeSendChannel[Any]]:
        """Feed Trio items to the asyncio coroutine function ``consumer(batch)``.

        An asyncio task (the pump) awaits ``consumer`` with every item sent since its last call,
        in order, so a burst of sends costs one asyncio wakeup. ``send`` waits while
        ``max_buffer_size`` items are buffered (backpressure). A consumer error ends the pump;
        the next ``send`` raises it (through ``map_error``).

        Raises:
            ValueError: ``max_buffer_size`` is below 1.

        Cancellation:
            Owns the pump. Leaving the block cancels it; ``await channel.aclose()`` first to
            let it drain. A pump that stops before taking every item sent (cancelled, even
            before it started; cancelled from the asyncio side) makes ``aclose`` and later
            sends raise a ``BridgeError``: an ``aclose`` returns only when everything arrived.
        """
        self._check_open()
        channel: BridgeSendChannel[Any] = BridgeSendChannel(
            self._link, max_buffer_size=max_buffer_size, map_error=map_error)
        async with self._pumping(channel, lambda: channel.run_pump(consumer)):
            yield channel

    @asynccontextmanager
    async def _pumping(self, channel: BridgeReceiveChannel[Any] | BridgeSendChannel[Any],
                       pump: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
        """Run the asyncio ``pump()`` for the block; leaving closes the channel and cancels
        the pump (and waits for it)."""
        # the pumps capture their errors into their channels: only the body's can escape
        async with open_unwrapping_nursery() as nursery:
            nursery.start_soon(self._own_pump, channel, pump)
            try:
                yield
            finally:
                channel.close()
                nursery.cancel_scope.cancel()

    async def _own_pump(self, channel: BridgeReceiveChannel[Any] | BridgeSendChannel[Any],
                        pump: Callable[[], Awaitable[None]]) -> None:
        """Run ``pump()`` as an asyncio task; however it ends, ``channel`` ends with it.

        The pump reports the ends it sees itself (its source's end or error, its consumer's
        error). The others reach only this owner: the pump cancelled with the block's scope
        (possibly before its task even started, or abandoned after ignoring that), its task
        cancelled from the asyncio side (the bridge closing), its source failing while being
        closed. Without this, a receiver or an ``aclose`` still waiting (a shielded one, one in
        a task outside the block) would wait forever for a pump that is gone.

        Raises:
            An error of the pump the channel can no longer report (its consumer left first),
            so that it is not lost; never a ``BridgeError``, which only says the pump stopped
            and means nothing once the consumer left.

        Cancellation:
            The pump's ``run``: cancelling cancels the pump; the channel then reports a
            ``BridgeError`` to whoever still uses it.
        """
        try:
            await self.run(pump)
        except Exception as error:
            if not channel.pump_ended(error) and not isinstance(error, BridgeError):
                raise
        except BaseException:
            channel.pump_ended(BridgeError("the channel's asyncio pump was cancelled"))
            raise
        else:
            channel.pump_ended(None)


def _forget_task(task: asyncio.Task[Any]) -> None:
    """Take ``task`` out of asyncio's registry of tasks, silently.

    The only use of asyncio's private members in agents_trio, isolated here: the loop's
    shutdown waits for every task it knows, so an abandoned task must be unknown to it
    (``asyncio.tasks._unregister_task``, present in every supported Python), and its
    destruction while pending must not be logged again (it was reported when abandoned).
    """
    asyncio.tasks._unregister_task(task)  # noqa: SLF001
    task._log_destroy_pending = False  # type: ignore[attr-defined]  # noqa: SLF001


async def _wait_done(task: asyncio.Future[Any]) -> None:
    if not task.done():
        done = trio.Event()
        task.add_done_callback(lambda _: done.set())
        await done.wait()


def _describe(task: asyncio.Future[Any]) -> str:
    """The task's name and the function its coroutine runs, for logs."""
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    work = getattr(coro, "__qualname__", None) or repr(coro)
    name = task.get_name() if isinstance(task, asyncio.Task) else repr(task)
    return f"{name!r} (coroutine {work})"


def _suspended(coro: object) -> bool:
    return getattr(coro, "cr_frame", getattr(coro, "gi_frame", None)) is not None


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _result(task: asyncio.Future[T]) -> T:
    if task.cancelled():
        raise BridgeError("the asyncio task was cancelled from the asyncio side")
    exc = task.exception()
    if exc is not None:
        raise exc
    return task.result()


# -- feeders ----------------------------------------------------------------------------------
class BridgeFeeder(Generic[T]):
    """Hands items to a plain function inside the loop, in order, batching the hops.

    ``feed(item)`` is sync and never blocks: the first item fed after a drain schedules one
    loop callback, and that callback passes every item fed until it runs. A burst of frames
    pushed by Trio therefore costs one hop. The first exception raised by ``fn`` stops the
    feeder (later items are dropped) and is kept in :attr:`error`.
    """

    def __init__(self, link: _Link, fn: Callable[[T], object]) -> None:
        self._link = link
        self._fn = fn
        self._pending: list[T] = []
        self._scheduled = False
        self.error: BaseException | None = None

    def feed(self, item: T) -> None:
        if self.error is not None or self._link.bridge.closed:
            return
        self._pending.append(item)
        self._link.counters.fed_items += 1
        if not self._scheduled:
            self._scheduled = True
            self._link.counters.callbacks += 1
            self._link.loop.call_soon(self._drain)

    def call(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` in the loop after the items fed so far (e.g. ``end_input``)."""
        self.feed(_Call(fn))  # type: ignore[arg-type]

    def _drain(self) -> None:
        self._scheduled = False
        items, self._pending = self._pending, []
        for item in items:
            if self.error is not None:
                return
            try:
                if isinstance(item, _Call):
                    item.fn()
                else:
                    self._fn(item)
            except Exception as e:
                self.error = e
                self._link.counters.callback_errors += 1
                logger.debug("feeder %r stopped: %r", self._fn, e)

    _PLAIN_METHODS.add(_drain)   # queued without the coroutine check (_cheap_call_soon)


class _Call:
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn


# -- asyncio -> Trio --------------------------------------------------------------------------
class BridgeReceiveChannel(Generic[T]):
    """The Trio end of a channel fed by asyncio code (see ``open_receive_channel``).

    ``receive()`` returns one item; ``receive_batch()`` every buffered item at once (one wakeup
    for a burst); ``async for`` iterates items. The end of the source raises
    ``trio.EndOfChannel`` from ``receive`` and stops iteration; a source error is raised, once.
    Several tasks may receive from one channel: each item goes to one of them.
    """

    def __init__(self, link: _Link, *, max_buffer_size: float,
                 map_error: Callable[[BaseException], BaseException] | None) -> None:
        _check_buffer_size(max_buffer_size)
        self._link = link
        self._max = max_buffer_size
        self._map_error = map_error
        self._buffer: collections.deque[T] = collections.deque()
        self._eof = False           # no item will be put any more (the source ended, or close)
        self._error: BaseException | None = None   # the end to raise, once (already mapped)
        self._closed = False        # the Trio side closed it: receives raise ClosedResourceError
        # Set while something is to be taken (an item, the end); whoever takes the last item
        # replaces it, so that a receiver that lost the race for it waits again.
        self._readable = trio.Event()
        self._receiver_waiting = False
        self._space: asyncio.Future[None] | None = None

    # producer side: asyncio (or any code in the Trio thread) --------------------------------
    def _put_nowait(self, item: T) -> None:
        self._buffer.append(item)
        self._link.counters.items_to_trio += 1
        self._wake_receiver()

    async def _put(self, item: T) -> None:
        """asyncio-flavoured: wait for room, then buffer ``item``."""
        while len(self._buffer) >= self._max and not self._eof:
            self._space = self._link.loop.create_future()
            await self._space
        if not self._eof:
            self._put_nowait(item)

    def _finish(self, error: BaseException | None = None) -> bool:
        """End the stream after the buffered items, with ``error`` (already mapped) if given.

        Returns whether this was the end: ``False`` if the stream had already ended or the
        Trio side closed it, and ``error`` will never be raised by this channel.
        """
        if self._eof:
            return False
        self._eof = True
        self._error = error
        self._wake_receiver()
        return True

    def _mapped(self, error: BaseException) -> BaseException:
        return self._map_error(error) if self._map_error else error

    def _wake_receiver(self) -> None:
        if not self._readable.is_set():
            if self._receiver_waiting:
                self._link.counters.trio_wakeups += 1
            self._readable.set()

    def _wake_producer(self) -> None:
        # Note: the producer is woken when the buffer drained to half, not at the first free
        # slot, so a consumer taking one item at a time costs one asyncio wakeup per half
        # buffer instead of one per item.
        space = self._space
        if space is not None and not space.done() and len(self._buffer) <= self._max // 2:
            self._space = None
            self._link.counters.asyncio_wakeups += 1
            space.set_result(None)

    # consumer side: Trio ----------------------------------------------------------------------
    def close(self) -> None:
        """Stop receiving: the producer is released and later items are dropped; receives,
        those waiting included, raise ``trio.ClosedResourceError``."""
        self._closed = self._eof = True
        self._buffer.clear()
        self._readable.set()
        space, self._space = self._space, None
        if space is not None and not space.done() and not self._link.loop.is_closed():
            space.set_result(None)

    def close_source(self) -> None:
        """For callback channels: end the stream after the buffered items."""
        self._finish()

    def _raise_end(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the bridge receive channel is closed")
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        raise trio.EndOfChannel

    def _took(self) -> None:
        """Items were taken: a receiver that finds nothing left must wait again."""
        if not self._buffer and not self._eof:
            self._readable = trio.Event()
        self._wake_producer()

    def receive_nowait(self) -> T:
        """Take one buffered item.

        Raises:
            trio.WouldBlock: Nothing is buffered yet.
            trio.EndOfChannel: The source ended. Or the source's (mapped) error, once.
            trio.ClosedResourceError: The channel was closed (its block was left).
        """
        if self._buffer:
            item = self._buffer.popleft()
            self._took()
            return item
        if self._eof:
            self._raise_end()
        raise trio.WouldBlock

    async def _wait_readable(self) -> None:
        if self._buffer or self._eof:
            await trio.lowlevel.checkpoint()
            return
        self._receiver_waiting = True
        try:
            # another receiver may take what woke this one: then the event was replaced
            while not self._buffer and not self._eof:
                await self._readable.wait()
        finally:
            self._receiver_waiting = False

    async def receive(self) -> T:
        """Wait for the next item (see :meth:`receive_nowait` for the errors).

        Cancellation: a checkpoint; a cancelled receive takes no item.
        """
        await self._wait_readable()
        return self.receive_nowait()

    async def receive_batch(self, max_items: int | None = None) -> list[T]:
        """Wait for at least one item, then take every buffered item (up to ``max_items``).

        Raises:
            ValueError: ``max_items`` is below 1 (at the call, before any wait).
            trio.EndOfChannel: The source ended and nothing is left (see
                :meth:`receive_nowait` for the others).

        Cancellation: a checkpoint; a cancelled call takes no item.
        """
        if max_items is not None and max_items < 1:
            raise ValueError(f"max_items must be at least 1 or None, not {max_items!r}")
        await self._wait_readable()
        if not self._buffer:
            self._raise_end()
        count = len(self._buffer) if max_items is None else min(max_items, len(self._buffer))
        batch = [self._buffer.popleft() for _ in range(count)]
        self._took()
        return batch

    def __aiter__(self) -> BridgeReceiveChannel[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    # run by the bridge ------------------------------------------------------------------------
    def producer_callback(self, convert: Callable[..., object] | None
                          ) -> Callable[..., None]:
        """Internal (``callback_channel``): a plain callback putting ``convert(*args)``
        (default: the single argument, or ``args``) into this channel, unbounded."""

        def callback(*args: object) -> None:
            if self._eof:
                return
            item = convert(*args) if convert else (args[0] if len(args) == 1 else args)
            self._put_nowait(item)  # type: ignore[arg-type]

        return callback

    def pump_ended(self, error: BaseException | None) -> bool:
        """Internal (the pump's owner): the pump is gone, because of ``error`` if given
        (the stream ends with it, unless it ended already). Returns whether the channel will
        report ``error``."""
        return self._finish(error)

    async def run_pump(self, source: AsyncIterable[T] | Callable[[], AsyncIterable[T]]
                       ) -> None:
        """Internal (``open_receive_channel``), asyncio-flavoured: read ``source`` into this
        channel until it ends or fails.

        Cancellation (asyncio's, when the block is left): the channel was closed first; the
        item being put is dropped and an async generator ``source`` is closed.
        """
        if callable(source) and not hasattr(source, "__aiter__"):
            try:
                source = source()
            except Exception as e:
                self._finish(self._mapped(e))
                return
        iterable: AsyncIterable[T] = source
        try:
            async for item in iterable:
                await self._put(item)
                if self._eof:
                    break
        except Exception as e:
            self._finish(self._mapped(e))
        else:
            self._finish()
        finally:
            if inspect.isasyncgen(iterable):
                await iterable.aclose()


def _check_buffer_size(max_buffer_size: float) -> None:
    # Note: a bridge channel has no rendezvous (a producer handing an item directly to a
    # waiting receiver): with no room, its pump would wait for room forever.
    if not max_buffer_size >= 1:
        raise ValueError(f"max_buffer_size must be at least 1, not {max_buffer_size!r}")


# -- Trio -> asyncio --------------------------------------------------------------------------
class BridgeSendChannel(Generic[T]):
    """The Trio end of a channel consumed by an asyncio coroutine (see ``open_send_channel``)."""

    def __init__(self, link: _Link, *, max_buffer_size: int,
                 map_error: Callable[[BaseException], BaseException] | None) -> None:
        _check_buffer_size(max_buffer_size)
        self._link = link
        self._max = max_buffer_size
        self._map_error = map_error
        self._buffer: collections.deque[T] = collections.deque()
        self._input_closed = False
        self._done = False          # the pump is gone (set by its owner, see pump_ended)
        # Raised by sends and aclose: the consumer's (mapped) error, or why the pump stopped
        # before taking every item (a BridgeError).
        self._error: BaseException | None = None
        # The batch the consumer runs; left in place when the pump is cancelled (cut short)
        self._in_hand: list[T] = []
        self._ready: asyncio.Future[None] | None = None
        self._changed = trio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._input_closed or self._done:
            raise trio.ClosedResourceError("the bridge send channel is closed")

    def _wake_pump(self) -> None:
        ready = self._ready
        if ready is not None and not ready.done():
            self._ready = None
            self._link.counters.asyncio_wakeups += 1
            ready.set_result(None)

    def send_nowait(self, item: T, *, force: bool = False) -> None:
        """Buffer ``item`` for the consumer (past the capacity if ``force``).

        Raises:
            trio.WouldBlock: The buffer is full.
            trio.ClosedResourceError: The channel was closed. Or the consumer's (mapped) error,
                or a ``BridgeError`` if its pump stopped before taking every item.
        """
        self._check()
        if len(self._buffer) >= self._max and not force:
            raise trio.WouldBlock
        self._buffer.append(item)
        self._wake_pump()

    async def send(self, item: T) -> None:
        """Buffer ``item``, waiting while the buffer is full.

        Cancellation: a checkpoint; a cancelled send buffers nothing.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            self._check()
            if len(self._buffer) < self._max:
                break
            await self._changed.wait()
        self.send_nowait(item)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def clear(self) -> list[T]:
        """Drop and return the items the consumer has not taken yet. Sync."""
        items = list(self._buffer)
        self._buffer.clear()
        self._notify()
        return items

    def requeue(self, items: list[T]) -> None:
        """Put ``items`` back in front of the buffer, ignoring its capacity (undoes ``clear``).

        Raises:
            trio.ClosedResourceError: The channel was closed. Or the consumer's (mapped) error.
        """
        self._check()
        self._buffer.extendleft(reversed(items))
        if items:
            self._wake_pump()
        self._notify()

    @property
    def buffered(self) -> int:
        """Items sent and not yet taken by the consumer."""
        return len(self._buffer)

    @property
    def finished(self) -> bool:
        """The consumer pump is gone (drained, cancelled or failed): nothing more is taken."""
        return self._done

    @property
    def idle(self) -> bool:
        """Nothing buffered and the consumer is not running a batch (nor was cut short in
        one)."""
        return not self._buffer and not self._in_hand

    async def wait_idle(self) -> None:
        """Wait until every sent item was consumed (or the consumer failed).

        Cancellation: a checkpoint; cancelling the waiter affects nothing else.
        """
        while not self.idle and not self._done:
            await self._changed.wait()
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        """End of input: the consumer gets the buffered items, then the pump returns."""
        self._input_closed = True
        self._wake_pump()
        self._notify()

    async def aclose(self) -> None:
        """Close and wait until the consumer took everything.

        Raises:
            The consumer's (mapped) error, if it failed.
            BridgeError: The pump was cancelled (its block left, the bridge closed) before
                the consumer took everything.

        Cancellation: a checkpoint; the channel stays closed to input and the pump goes on
        draining until the ``open_send_channel`` block is left; calling it again waits again.
        """
        self.close()
        while not self._done:
            await self._changed.wait()
        if self._error is not None:
            raise self._error

    def pump_ended(self, error: BaseException | None) -> bool:
        """Internal (the pump's owner): the pump is gone, because of ``error`` if given.
        Returns whether the channel will report ``error``: not if it already has an error to
        report, nor if the pump had taken everything of a closed input (nothing was lost)."""
        took = error is not None and self._error is None and not (
            self._input_closed and self.idle)
        if took:
            self._error = error
        self._done = True
        self._notify()
        return took

    async def run_pump(self, consumer: Callable[[list[T]], Awaitable[object]]) -> None:
        """Internal (``open_send_channel``), asyncio-flavoured: hand batches to ``consumer``
        until the channel closes.

        Cancellation (asyncio's, when the block is left): the batch being consumed is cut
        short and not requeued. The owner then marks the channel finished: later sends raise
        ``trio.ClosedResourceError``, or a ``BridgeError`` (as ``aclose`` does) if items were
        left untaken.
        """
        loop = self._link.loop
        try:
            while True:
                if not self._buffer:
                    if self._input_closed:
                        return
                    self._ready = loop.create_future()
                    await self._ready
                    continue
                batch = self._in_hand = list(self._buffer)
                self._buffer.clear()
                self._notify()
                await consumer(batch)
                self._in_hand = []
                self._link.counters.batches_to_asyncio += 1
                self._link.counters.items_to_asyncio += len(batch)
                self._notify()
        except Exception as e:
            # the failed batch is accounted for by the error
            self._in_hand = []
            self._error = self._map_error(e) if self._map_error else e
        # Note: no `finally` marking the channel finished: a pump that never starts has none;
        # its owner does it, whichever way the pump ended (see AsyncioBridge._own_pump).


def is_asyncio_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is asyncio's ``CancelledError`` (for asyncio-flavoured code outside this
    module, which must not import asyncio)."""
    return isinstance(exc, asyncio.CancelledError)


# -- asyncio -> Trio in a thread --------------------------------------------------------------
class TrioResult(Generic[T]):
    """asyncio-flavoured: the result of Trio work running in another thread, awaited from the
    asyncio loop that made this object. The Trio side calls :meth:`resolve` (thread-safe; the
    first result counts); the asyncio side awaits :meth:`wait`."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[T | None] = self._loop.create_future()

    def resolve(self, result: outcome.Outcome[T | None]) -> None:
        """From any thread: hand the Trio work's outcome to the waiting loop."""
        try:
            self._loop.call_soon_threadsafe(self._settle, result)
        except RuntimeError:  # the asyncio loop is gone: nobody is waiting any more
            pass

    def _settle(self, result: outcome.Outcome[T | None]) -> None:
        if self._future.done():
            return
        if isinstance(result, outcome.Error):
            self._future.set_exception(result.error)
        elif isinstance(result, outcome.Value):
            self._future.set_result(result.value)

    async def wait(self, cancel: Callable[[], None], *, what: str,
                   cancel_grace: float) -> T | None:
        """The result. Cancellation: cancelling the awaiting task calls ``cancel`` (which
        cancels the Trio work from this thread), waits at most ``cancel_grace`` seconds for the
        work to end, then re-raises the cancellation."""
        try:
            return await asyncio.shield(self._future)
        except asyncio.CancelledError:
            cancel()
            try:
                await asyncio.wait_for(asyncio.shield(self._future), cancel_grace)
            except asyncio.TimeoutError:
                logger.warning("%s did not finish within %.1f s of its cancellation", what,
                               cancel_grace)
            except Exception:
                logger.exception("%s failed while cancelled", what)
            raise


def plain_asyncio_in_this_thread() -> None:
    """Make ``asyncio.new_event_loop()`` in this thread build a plain asyncio loop.

    Importing ``trio_asyncio`` (the bridge does) makes every later ``asyncio.new_event_loop()``
    of the process build a trio-asyncio loop, each with a Trio run of its own, unless the
    thread has set an event loop policy of its own: LiveKit's job threads make their loop that
    way. Call this in such a thread before its loop is made (the worker calls it from
    LiveKit's per-job setup). The policy set here is this thread's only.
    """
    import trio_asyncio  # noqa: F401 - its policy hooks make the policy below thread-local

    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())


async def run_trio_in_thread(async_fn: Callable[..., Awaitable[T]], *args: object,
                             name: str = "trio", cancel_grace: float = 10.0,
                             **trio_run_kwargs: object) -> T | None:
    """asyncio-flavoured: run ``trio.run(async_fn, *args)`` in a new thread and await it.

    This is how asyncio code (LiveKit's job process) hosts the Trio runtime. Cancelling the
    awaiting asyncio task cancels the whole Trio run (its root cancel scope) and waits, at
    most ``cancel_grace`` seconds, for it to unwind before re-raising the cancellation.

    Returns:
        What ``async_fn`` returned (``None`` if the run was cancelled).

    Raises:
        Whatever ``async_fn`` raised.
    """
    finished: TrioResult[T] = TrioResult()
    lock = threading.Lock()
    state: dict[str, Any] = {"token": None, "scope": None, "cancelled": False}

    async def trio_main() -> T | None:
        with trio.CancelScope() as scope:
            with lock:
                state["token"] = trio.lowlevel.current_trio_token()
                state["scope"] = scope
                if state["cancelled"]:
                    scope.cancel()
            return await async_fn(*args)
        return None

    def thread_main() -> None:
        def run() -> T | None:
            return trio.run(trio_main, **trio_run_kwargs)  # type: ignore[arg-type]

        finished.resolve(outcome.capture(run))

    def cancel_trio() -> None:
        with lock:
            state["cancelled"] = True
            token, scope = state["token"], state["scope"]
        if token is not None:
            try:
                token.run_sync_soon(scope.cancel)
            except trio.RunFinishedError:
                pass

    thread = threading.Thread(target=thread_main, name=name, daemon=True)
    thread.start()
    return await finished.wait(cancel_trio, what=f"the Trio run in thread {name!r}",
                               cancel_grace=cancel_grace)
