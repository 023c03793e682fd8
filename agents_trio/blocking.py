"""Blocking models off the Trio loop: a worker thread or a subprocess, bounded queues.

API (for model authors)::

    from agents_trio.blocking import open_blocking_worker

    def make_decoder() -> Callable[[bytes], Iterable[str]]:   # runs in the worker
        decoder = SomeDecoder()                                 # CPU-heavy, blocking
        return decoder.process                                  # may also have .finish()/.close()

    async with open_blocking_worker(make_decoder, mode="process", max_pending=8) as worker:
        await worker.send(chunk)          # waits while 8 items are queued (backpressure)
        worker.end_input()                # no more items: the rest, then step.finish()
        async for result in worker:       # what each step returned, flattened, in order
            ...

- ``open_blocking_worker(factory, *, mode="thread" | "process", max_pending=16,
  max_results=64, mp_context="spawn", kill_grace=2.0)`` -> ``BlockingWorker[I, O]``. ``factory()`` is called
  once *in the worker* and returns the *step*: ``step(item) -> Iterable[O]`` (the outputs of
  one input item; a generator or a list). If the step has ``finish() -> Iterable[O]``, it is
  called after the last item when the input ends (``end_input``); if it has ``close()``, that
  is called in the worker when the worker stops, whatever the reason.
- ``BlockingWorker``: ``await send(item)``, ``send_nowait(item)`` (``trio.WouldBlock`` when
  full), ``end_input()``, ``await receive()`` (``trio.EndOfChannel`` at the end),
  ``async for``, ``pending`` (items queued, not yet started). The worker lives as long as
  the ``async with`` block.
- ``await run_blocking(fn, *args, mode="thread" | "process")``: one call, same rules.

Where CPU-heavy work goes. A model's methods run on the Trio loop, which also runs every
session of the process: any call that holds the loop for more than about a millisecond (an
ONNX or Kaldi inference, a decoder, a resampler over a long buffer) delays every timer, every
audio frame and every other session. Such work must run off the loop:

- ``mode="thread"`` (``trio.to_thread``): enough for code that releases the GIL while it
  computes (numpy, onnxruntime, most C extensions doing I/O or BLAS). Code that *holds* the GIL
  (pure Python, or a C extension that does not release it — PocketSphinx does not) still
  stalls the loop in a thread: the interpreter switches threads only every few milliseconds
  (``sys.getswitchinterval()``), which shows as 5-70 ms of loop lag per step.
- ``mode="process"``: a child process (``multiprocessing``, ``spawn`` by default) owns the
  model, so it cannot take the GIL from the loop. ``factory`` must then be picklable (a
  module-level function or a ``functools.partial`` of one), and so must items and outputs
  (bytes, numpy arrays, strings, ``rtc.AudioFrame``; each item is copied through a pipe,
  so batch small frames). Starting the child costs an interpreter start and the imports of
  ``factory``'s module (a few hundred ms): open the worker once per model or stream, not
  per call.

Semantics, both modes:

- **Order and one step at a time.** Items are processed in the order sent, one at a time, by
  the same step object; outputs come out in that order.
- **Backpressure.** ``send`` waits while ``max_pending`` items wait to be started; the worker
  stops taking items while ``max_results`` outputs wait to be received. A slow consumer thus
  slows the producer instead of growing a queue.
- **Errors.** An exception raised by ``factory``, the step, ``finish`` (in the worker) is
  raised by the next ``receive`` (after the outputs produced before it) and by later
  ``send`` calls, as a :class:`BlockingWorkerError` whose ``__cause__`` is the original (in
  process mode, the original is re-raised from its pickle when it pickles, else a
  ``RuntimeError`` with its repr and traceback text). A child process that dies raises
  ``BlockingWorkerError`` too.
- **Cancellation.** Leaving the ``async with`` (normally, by an error or by a cancellation)
  stops the worker. A thread cannot be interrupted: the step running in it finishes first
  (shielded; its result is dropped), then ``close()`` runs. A process is terminated at once
  (``SIGTERM``, then ``SIGKILL`` after ``kill_grace`` seconds) and waited for. Nothing outlives
  the block in either mode. ``send`` and ``receive`` are ordinary Trio checkpoints: a cancelled
  ``send`` queues nothing, a cancelled ``receive`` takes nothing.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import pickle
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Generic, Literal, Protocol, TypeVar

import trio

from ._errors import AgentsTrioError

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["BlockingWorker", "BlockingWorkerError", "open_blocking_worker", "run_blocking"]

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741
R = TypeVar("R")

Mode = Literal["thread", "process"]


class BlockingWorkerError(AgentsTrioError):
    """The blocking worker failed: its factory, step or ``finish`` raised (the
    ``__cause__``), or its process died."""


_Step = Callable[[object], Iterable[object]]


# -- the worker side (a Trio worker thread, or the child process) ----------------------------
def _finish(step: object) -> list[object]:
    finish = getattr(step, "finish", None)
    return list(finish()) if callable(finish) else []


def _close(step: object) -> None:
    close = getattr(step, "close", None)
    if callable(close):
        close()


_ITEM, _END, _STOP = "item", "end", "stop"


def _child_main(conn: multiprocessing.connection.Connection,
                factory: Callable[[], _Step]) -> None:
    """The child process: one request at a time, one reply each.

    Requests: ``(_ITEM, item)``, ``(_END, None)``, ``(_STOP, None)``. Replies:
    ``("ok", outputs)`` or ``("error", (pickled exception or None, repr, traceback text))``.
    """
    step: object = None
    try:
        try:
            step = factory()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            conn.send(("error", _pack_error(e)))
            return
        conn.send(("ok", []))
        while True:
            try:
                kind, item = conn.recv()
            except (EOFError, OSError):
                return
            if kind == _STOP:
                return
            try:
                outputs = _finish(step) if kind == _END else list(step(item))
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                conn.send(("error", _pack_error(e)))
                return
            conn.send(("ok", outputs))
    finally:
        try:
            if step is not None:
                _close(step)
        finally:
            conn.close()


def _pack_error(error: BaseException) -> tuple[bytes | None, str, str]:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        data: bytes | None = pickle.dumps(error)
    except Exception:  # noqa: BLE001 - not picklable: the text stands in
        data = None
    return data, repr(error), text


def _unpack_error(packed: tuple[bytes | None, str, str]) -> BaseException:
    data, description, text = packed
    if data is not None:
        try:
            error = pickle.loads(data)
            if isinstance(error, BaseException):
                return error
        except Exception:  # noqa: BLE001 - fall back to the text
            pass
    return RuntimeError(f"{description} in the worker process:\n{text}")


# -- the Trio side ------------------------------------------------------------------------------
class _Backend(Protocol):
    async def start(self) -> None: ...
    async def step(self, item: object) -> list[object]: ...
    async def finish(self) -> list[object]: ...
    async def stop(self) -> None: ...


class _ThreadBackend:
    def __init__(self, factory: Callable[[], _Step]) -> None:
        self._factory = factory
        self._step: _Step | None = None
        self._limiter = trio.CapacityLimiter(1)

    async def start(self) -> None:
        self._step = await trio.to_thread.run_sync(self._factory, limiter=self._limiter)

    async def step(self, item: object) -> list[object]:
        step = self._step
        assert step is not None
        # Not abandoned on cancel: the step finishes (the thread cannot be stopped) and the
        # cancellation is raised after it.
        return await trio.to_thread.run_sync(lambda: list(step(item)), limiter=self._limiter)

    async def finish(self) -> list[object]:
        return await trio.to_thread.run_sync(_finish, self._step, limiter=self._limiter)

    async def stop(self) -> None:
        if self._step is not None:
            step, self._step = self._step, None
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_close, step, limiter=self._limiter)


class _ProcessBackend:
    def __init__(self, factory: Callable[[], _Step], *, mp_context: str,
                 kill_grace: float) -> None:
        self._factory = factory
        self._context = multiprocessing.get_context(mp_context)
        self._kill_grace = kill_grace
        self._conn: multiprocessing.connection.Connection | None = None
        self._process: multiprocessing.process.BaseProcess | None = None
        self._io_threads = 0  # threads in conn.send/recv (abandoned ones included)
        self._io_lock = threading.Lock()

    async def start(self) -> None:
        parent, child = self._context.Pipe()
        # Note: the stubs type get_context(str) as BaseContext, which has no Process.
        process_class: type[multiprocessing.process.BaseProcess] = getattr(
            self._context, "Process")
        process = process_class(target=_child_main, args=(child, self._factory),
                                        name="agents_trio blocking worker", daemon=True)
        self._conn, self._process = parent, process
        await trio.to_thread.run_sync(process.start)
        child.close()
        await self._reply()

    async def _reply(self) -> list[object]:
        conn = self._conn
        assert conn is not None
        try:
            # The thread is abandoned on cancel: stop() then kills the child, which ends recv.
            kind, payload = await trio.to_thread.run_sync(self._io, conn.recv,
                                                          abandon_on_cancel=True)
        except (EOFError, OSError) as e:
            code = self._process.exitcode if self._process is not None else None
            raise BlockingWorkerError(f"the worker process died (exit code {code})") from e
        if kind == "error":
            error = _unpack_error(payload)
            raise BlockingWorkerError(f"the blocking worker failed: {error!r}") from error
        return list(payload)

    async def _request(self, kind: str, item: object) -> list[object]:
        conn = self._conn
        assert conn is not None
        try:
            # The child is waiting for a request (one at a time), so send does not block long.
            await trio.to_thread.run_sync(self._io, lambda: conn.send((kind, item)),
                                          abandon_on_cancel=True)
        except (BrokenPipeError, EOFError, OSError) as e:
            raise BlockingWorkerError("the worker process is gone") from e
        return await self._reply()

    def _io(self, fn: Callable[[], R]) -> R:
        """In a worker thread: one blocking pipe operation, counted."""
        with self._io_lock:
            self._io_threads += 1
        try:
            return fn()
        finally:
            with self._io_lock:
                self._io_threads -= 1

    async def step(self, item: object) -> list[object]:
        return await self._request(_ITEM, item)

    async def finish(self) -> list[object]:
        outputs = await self._request(_END, None)
        return outputs

    async def stop(self) -> None:
        process, conn = self._process, self._conn
        if process is None or conn is None:
            return
        self._process = None
        with trio.CancelScope(shield=True):
            if process.is_alive():
                process.terminate()
                await trio.to_thread.run_sync(process.join, self._kill_grace)
                if process.is_alive():
                    process.kill()
                    await trio.to_thread.run_sync(process.join)
            else:
                await trio.to_thread.run_sync(process.join)
        # An abandoned thread may still be in recv (it gets EOF now that the child is gone):
        # the pipe is then closed by the garbage collector, never under a reader.
        if not self._io_threads:
            conn.close()


_DONE = object()


class BlockingWorker(Generic[I, O]):
    """The Trio end of a blocking worker; see :func:`open_blocking_worker`."""

    def __init__(self, max_pending: int, max_results: int) -> None:
        self._in_send, self._in_receive = trio.open_memory_channel[object](max_pending)
        self._out_send, self._out_receive = trio.open_memory_channel[O](max_results)
        self._error: BlockingWorkerError | None = None
        self._input_ended = False

    def _raise_error(self) -> None:
        error = self._error
        if error is not None:
            raise BlockingWorkerError(*error.args) from error.__cause__

    def _check(self) -> None:
        self._raise_error()
        if self._input_ended:
            raise trio.ClosedResourceError("end_input() was called")

    async def send(self, item: I) -> None:
        """Queue ``item``, waiting while ``max_pending`` items are queued.

        Raises:
            BlockingWorkerError: The worker failed.
            trio.ClosedResourceError: After ``end_input``.

        Cancellation: a checkpoint; a cancelled send queues nothing and the worker stays
        usable.
        """
        self._check()
        try:
            await self._in_send.send(item)
        except trio.BrokenResourceError:
            self._check()
            raise BlockingWorkerError("the blocking worker stopped") from None

    def send_nowait(self, item: I) -> None:
        """Queue ``item`` or raise ``trio.WouldBlock`` when ``max_pending`` are queued."""
        self._check()
        try:
            self._in_send.send_nowait(item)
        except trio.BrokenResourceError:
            self._check()
            raise BlockingWorkerError("the blocking worker stopped") from None

    def end_input(self) -> None:
        """No more items: the queued ones are processed, then the step's ``finish``, then
        ``receive`` raises ``trio.EndOfChannel``. Idempotent."""
        if not self._input_ended:
            self._input_ended = True
            self._in_send.close()

    @property
    def pending(self) -> int:
        """Items queued and not started yet."""
        return self._in_send.statistics().current_buffer_used

    async def receive(self) -> O:
        """The next output.

        Raises:
            trio.EndOfChannel: The input ended and every output was received.
            BlockingWorkerError: The worker failed (after the outputs it produced before).

        Cancellation: a checkpoint; a cancelled receive takes no output (the next call
        returns it).
        """
        try:
            return await self._out_receive.receive()
        except trio.EndOfChannel:
            self._raise_error()
            raise

    def __aiter__(self) -> BlockingWorker[I, O]:
        return self

    async def __anext__(self) -> O:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    @asynccontextmanager
    async def running(self, backend: _Backend) -> AsyncIterator[None]:
        """Internal (used by :func:`open_blocking_worker`): drive ``backend`` for the block.

        Cancellation: owns the driving task; leaving the block, by a cancellation too,
        stops the worker as the module docstring says (a thread's step finishes first, a
        process is terminated) and waits for it.
        """
        async with trio.open_nursery() as nursery:
            await nursery.start(self._drive, backend)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()

    async def _drive(self, backend: _Backend, task_status: trio.TaskStatus[None]) -> None:
        out = self._out_send
        try:
            async with out, self._in_receive:
                try:
                    await backend.start()
                except BlockingWorkerError as e:
                    self._error = e
                    return
                finally:
                    task_status.started()
                async for item in self._in_receive:
                    try:
                        outputs = await backend.step(item)
                    except BlockingWorkerError as e:
                        self._error = e
                        return
                    for output in outputs:
                        await out.send(output)  # type: ignore[arg-type]
                try:
                    outputs = await backend.finish()
                except BlockingWorkerError as e:
                    self._error = e
                    return
                for output in outputs:
                    await out.send(output)  # type: ignore[arg-type]
        finally:
            await backend.stop()


class _GuardedThreadBackend(_ThreadBackend):
    async def start(self) -> None:
        try:
            await super().start()
        except Exception as e:
            raise BlockingWorkerError(f"the blocking worker failed: {e!r}") from e

    async def step(self, item: object) -> list[object]:
        try:
            return await super().step(item)
        except Exception as e:
            raise BlockingWorkerError(f"the blocking worker failed: {e!r}") from e

    async def finish(self) -> list[object]:
        try:
            return await super().finish()
        except Exception as e:
            raise BlockingWorkerError(f"the blocking worker failed: {e!r}") from e


@asynccontextmanager
async def open_blocking_worker(
        factory: Callable[[], Callable[[I], Iterable[O]]], *, mode: Mode = "thread",
        max_pending: int = 16, max_results: int = 64, mp_context: str = "spawn",
        kill_grace: float = 2.0) -> AsyncIterator[BlockingWorker[I, O]]:
    """Run ``factory()``'s step on each item sent, in a worker thread or process.

    Args:
        factory: Called once in the worker; returns ``step(item) -> Iterable[output]``
            (optionally with ``finish()`` and ``close()``). Picklable in process mode.
        mode: ``"thread"`` (a Trio worker thread) or ``"process"`` (a child process).
        max_pending: Items ``send`` may queue before it waits (>= 0; 0 = a rendezvous).
        max_results: Outputs buffered before the worker waits for ``receive``.
        mp_context: The multiprocessing start method in process mode.
        kill_grace: Seconds between ``SIGTERM`` and ``SIGKILL`` when the process is stopped.

    The block waits for the worker to have started (``factory`` returned); a factory error is
    raised by the first ``receive`` (and ``send``).

    Cancellation:
        Owns the worker; leaving the block stops it (see the module docstring) and waits for
        it, shielded.
    """
    if mode == "thread":
        backend: _Backend = _GuardedThreadBackend(factory)  # type: ignore[arg-type]
    elif mode == "process":
        backend = _ProcessBackend(factory, mp_context=mp_context,  # type: ignore[arg-type]
                                  kill_grace=kill_grace)
    else:
        raise ValueError(f"mode must be 'thread' or 'process', not {mode!r}")
    worker: BlockingWorker[I, O] = BlockingWorker(max_pending, max_results)
    try:
        async with worker.running(backend):
            yield worker
    except BaseExceptionGroup as group:  # the driver captures its errors: only the body's
        exc: BaseException = group
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        raise exc from exc.__cause__


class _Once:
    """A picklable factory whose step calls ``fn(*args)`` once per item."""

    def __init__(self, fn: Callable[..., object], args: tuple[object, ...]) -> None:
        self.fn, self.args = fn, args

    def make(self) -> Callable[[object], list[object]]:
        return self.step

    def step(self, item: object) -> list[object]:
        return [self.fn(*self.args)]


async def run_blocking(fn: Callable[..., R], *args: object, mode: Mode = "thread",
                       mp_context: str = "spawn") -> R:
    """``fn(*args)`` in a worker thread or a fresh child process (picklable there).

    Raises:
        BlockingWorkerError: ``fn`` raised (the ``__cause__``), or the process died.

    Cancellation:
        Thread: ``fn`` finishes first (it cannot be interrupted). Process: it is terminated.
    """
    if mode == "thread":
        try:
            return await trio.to_thread.run_sync(fn, *args)
        except Exception as e:
            raise BlockingWorkerError(f"the blocking call failed: {e!r}") from e
    once = _Once(fn, args)
    async with open_blocking_worker(once.make, mode=mode, max_pending=1,
                                    mp_context=mp_context) as worker:
        await worker.send(None)
        worker.end_input()
        return await worker.receive()  # type: ignore[return-value]
