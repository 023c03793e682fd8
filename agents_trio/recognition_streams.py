"""A recognition stream (VAD or STT) kept open by one task, reopened after failures.

A model's stream can fail in five places: opening it, ``push_frame`` (called by the audio
pump, in another task), ``end_input``, iterating its events, and closing it (also when it is
closed for a reopen). Every failure ends the stream's current incarnation — a push failure
cancels that incarnation's scope, so the error reaches the task that owns the stream — and is
reported once, with the incarnation's first error. The stream is then reopened after a backoff
(0.5 s, doubling up to 5 s), unless its input has ended. A stream that delivered an event before failing counts as
working: the count of consecutive failures restarts. When that count exceeds the policy's
bound the stream is given up and the failure is reported as final.

A stream may return from ``push_frame`` the events that frame produced at once (a VAD whose
inference runs inside ``push_frame``): they are handled right there, in the pushing task and
in order, as if they had come through the iteration, without a hop to the owner task; a
failure while handling them is the incarnation's failure, as a failing push is. Events
produced later (by work running elsewhere) come through the iteration as before.

Frames pushed while no incarnation takes them are dropped: between a failure and the reopening
(a recognizer cannot use audio from before it was connected), once the input ended (the stream
finishes what it has; a flush with silence after the end does not reach it), and while an
incarnation is being closed (it failed, was reopened or finished). An incarnation that was
dropped (reopened, or failed) has no more of its events handled, even those a push returned
together with the one whose handling dropped it.
"""

from __future__ import annotations

import enum
import logging
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import msgspec
import trio

from .nurseries import single_leaf
from livekit import rtc

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

logger = logging.getLogger("agents_trio")


class RestartPolicy(msgspec.Struct, kw_only=True, frozen=True):
    """How a failed stream is reopened.

    Args:
        max_failures: Consecutive failures that are followed by a restart; one more gives
            the stream up.
        first_delay: Wait before the first restart (LiveKit reopens its STT after 0.5 s).
        max_delay: The backoff doubles up to this.
    """

    max_failures: int = 3
    first_delay: float = 0.5
    max_delay: float = 5.0

    def delay(self, failures: int) -> float:
        """The wait before the restart that follows the ``failures``-th consecutive failure."""
        return min(self.first_delay * 2.0 ** max(failures - 1, 0), self.max_delay)


class StreamState(enum.Enum):
    OPENING = "opening"
    OPEN = "open"
    RESTARTING = "restarting"   # waiting out the backoff after a failure
    ENDED = "ended"             # the input ended, the stream finished, or it was given up


class StreamReport(Protocol):
    """What a supervised stream reports, all called in its owner task (an event produced by
    a push: in the pushing task).

    ``on_event(ev)`` for each event (an exception it raises counts as the stream's failure);
    ``on_error(error)`` for each failure, then ``on_lost()`` (what the lost incarnation was
    doing is settled there); ``on_given_up(error)`` once the bound is exceeded.
    """

    def on_event(self, ev: Any) -> None: ...  # noqa: ANN401 - a VAD's or STT's event
    def on_lost(self) -> None: ...
    def on_error(self, error: BaseException) -> None: ...
    def on_given_up(self, error: BaseException) -> None: ...


class StreamHooks(msgspec.Struct, kw_only=True, frozen=True):
    """A :class:`StreamReport` made of four callables."""

    on_event: Callable[[Any], None]
    on_lost: Callable[[], None]
    on_error: Callable[[BaseException], None]
    on_given_up: Callable[[BaseException], None]


class SupervisedStream:
    """Keeps one stream of ``open_stream()`` open while ``run`` runs (see the module doc).

    Args:
        open_stream: Returns an async context manager yielding a stream with ``push_frame``,
            ``end_input`` and async iteration (a VAD's or STT's ``stream``).
        hooks: Where events and failures go (a :class:`StreamReport`: an object whose methods
            are called, so that a long-lived stream holds no closures or bound methods).
        policy: Backoff and bound.
        name: For logs (``"VAD"``, ``"STT"``).
    """

    def __init__(self, open_stream: Callable[[], AbstractAsyncContextManager[Any]], *,
                 hooks: StreamReport, policy: RestartPolicy, name: str) -> None:
        self._open_stream = open_stream
        self._hooks = hooks
        self._policy = policy
        self._name = name
        self._state = StreamState.OPENING
        # the open incarnation while it takes frames: None between incarnations, once the
        # input ended, and while an incarnation is being closed
        self._stream: Any = None
        self._incarnation: trio.CancelScope | None = None
        self._backoff_scope: trio.CancelScope | None = None
        self._push_error: BaseException | None = None
        self._input_ended = False
        self._reopen = False
        self._delivered = False   # whether the open incarnation handled an event
        self._task_status: trio.TaskStatus[None] | None = None   # until run has started

    @property
    def state(self) -> StreamState:
        return self._state

    # -- called by the audio pump -------------------------------------------------------------
    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Push ``frame`` to the incarnation taking frames, if any (else it is dropped) and
        handle the events it returns, in this task, while that incarnation lives."""
        stream = self._stream
        if stream is None:
            return
        try:
            events = stream.push_frame(frame)
            if events:
                # produced at once by the push: handled here, in the pushing task
                self._hooks.on_event(events[0])
                self._delivered = True
                if len(events) > 1:   # seldom: several events from one frame
                    self._handle_more(events)
        except Exception as e:
            self._fail_from_outside(e)

    def _handle_more(self, events: Sequence[Any]) -> None:
        """The events after the first that one push returned, while their incarnation lives:
        handling one may drop it (a reopen, a failure), and then the rest are its events no
        more. (Before the first nothing can have dropped it: the push found it taking frames
        in this same step.)"""
        incarnation = self._incarnation
        hooks = self._hooks
        for ev in events[1:]:
            if incarnation is None or incarnation.cancel_called:
                break
            hooks.on_event(ev)
            self._delivered = True

    def end_input(self) -> None:
        """No more frames: the stream finishes what it has and is not reopened; a frame
        pushed from now on is dropped."""
        self._input_ended = True
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.end_input()
            except Exception as e:
                self._fail_from_outside(e)
        elif self._backoff_scope is not None:
            self._backoff_scope.cancel()   # no restart for an ended input

    def reopen(self) -> None:
        """Close the open stream (dropping what it buffered) and open a fresh one; not a
        failure. Nothing happens while no stream takes frames (none is open, it is being
        closed, or the input ended)."""
        if self._incarnation is not None and self._stream is not None:
            self._reopen = True
            self._stream = None
            self._incarnation.cancel()

    def _fail_from_outside(self, error: BaseException) -> None:
        """A push or end of input raised: end the incarnation with that error."""
        if self._push_error is None:
            self._push_error = error
        self._stream = None
        if self._incarnation is not None:
            self._incarnation.cancel()

    # -- the owner task -----------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Open the stream and keep it open until the input ends or the stream is given up;
        ``started`` once the first opening succeeded or failed.

        One coroutine does it all (the incarnations and the backoffs are inline, not awaited
        helpers): a parked stream holds a single frame of its own.

        Cancellation: cancelling the caller closes the current incarnation; nothing is
        reported.
        """
        self._task_status = task_status
        del task_status   # kept only until started (it holds the nursery it started in)
        failures = 0
        backoff: float | None = None   # the wait before reopening after a failure
        try:
            while not self._input_ended:
                if backoff is not None:
                    self._state = StreamState.RESTARTING   # the backoff, cut by end_input
                    with trio.CancelScope() as self._backoff_scope:
                        try:
                            await trio.sleep(backoff)
                        finally:
                            self._backoff_scope = None
                    backoff = None
                    continue   # reopened only if the input has not ended meanwhile
                # one incarnation: opened, then its events handled until it ends or fails
                self._state = StreamState.OPENING
                self._push_error = None
                self._delivered = False
                error: BaseException | None = None
                with trio.CancelScope() as self._incarnation:
                    try:
                        async with self._open_stream() as stream:
                            self._state = StreamState.OPEN
                            self._started()
                            if self._input_ended:
                                stream.end_input()
                            else:
                                self._stream = stream   # it takes frames from now on
                            try:
                                hooks = self._hooks
                                async for ev in stream:
                                    hooks.on_event(ev)
                                    self._delivered = True
                            finally:
                                self._stream = None   # being closed: it takes no frame
                    except Exception as e:
                        error = e
                    except BaseExceptionGroup as group:   # model errors and a cancellation
                        error, rest = group.split(Exception)
                        if rest is not None:
                            raise rest from None
                    finally:
                        self._stream = None
                        self._incarnation = None
                if self._push_error is not None:
                    error = self._push_error   # the first failure: the incarnation's end
                self._started()
                reopen, self._reopen = self._reopen, False
                if error is None:
                    if reopen:
                        continue
                    break
                # a failure, even of an incarnation being reopened (its closing raised)
                failures = 1 if self._delivered else failures + 1
                if self._gives_up(single_leaf(error), failures):
                    break
                backoff = self._policy.delay(failures)
        finally:
            self._state = StreamState.ENDED
        self._started()

    def _started(self) -> None:
        """Tell ``run``'s caller it started, the first time only."""
        status, self._task_status = self._task_status, None
        if status is not None:
            status.started()

    def _gives_up(self, error: BaseException, failures: int) -> bool:
        """Report the ``failures``-th failure in a row; whether the bound is now exceeded
        (then reported as final)."""
        logger.warning("the %s stream failed (%d in a row): %r", self._name, failures,
                       error, exc_info=error)
        self._hooks.on_error(error)
        self._hooks.on_lost()
        if failures <= self._policy.max_failures:
            return False
        logger.error("the %s stream failed %d times in a row; giving it up",
                     self._name, failures)
        self._hooks.on_given_up(error)
        return True
