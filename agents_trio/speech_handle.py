"""SpeechHandle: one agent turn (a ``say`` or a generated reply with its tool rounds).

A handle's work runs in its activity's nursery. Each generation step runs inside a cancel scope
that the handle owns; ``interrupt()`` cancels that scope, which takes effect at the next
checkpoint of the step. Tool executions of a step run outside that scope, so interrupting never
cancels a running tool (its result is kept, with no reply).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Generator, Iterable
from typing import Any

import trio

from ._ids import short_id
from .chat import ChatItem, new_item_id
from .events import SpeechSource
from .instructions import InputDetails
from .nurseries import Flag
from .speech_args import check_flag

#: LiveKit's default: a speech answers spoken input unless told otherwise
DEFAULT_INPUT_DETAILS = InputDetails(modality="audio")

logger = logging.getLogger("agents_trio.speech")

SPEECH_PRIORITY_LOW = 0
SPEECH_PRIORITY_NORMAL = 5
SPEECH_PRIORITY_HIGH = 10


async def _swallow_failure(awaitable: Awaitable[object]) -> None:
    try:
        await awaitable
    except Exception:
        logger.warning("an awaitable given to wait_if_not_interrupted failed", exc_info=True)


def _close_unstarted(awaitable: Awaitable[object]) -> None:
    close = getattr(awaitable, "close", None)  # a coroutine never awaited: no warning
    if callable(close):
        close()


class _Phase(enum.Enum):
    CREATED = "created"
    SCHEDULED = "scheduled"
    DONE = "done"


class SpeechHandle:
    """A handle on one speech of the agent.

    ``await handle`` waits until the whole turn is done, tool rounds and tool replies included;
    it never raises. The error of a failed model call is available from ``exception()``.
    """

    SPEECH_PRIORITY_LOW = SPEECH_PRIORITY_LOW
    SPEECH_PRIORITY_NORMAL = SPEECH_PRIORITY_NORMAL
    SPEECH_PRIORITY_HIGH = SPEECH_PRIORITY_HIGH

    def __init__(self, *, allow_interruptions: bool = True,
                 priority: int = SPEECH_PRIORITY_NORMAL,
                 source: SpeechSource = "generate_reply",
                 input_details: InputDetails = DEFAULT_INPUT_DETAILS) -> None:
        self.id = short_id("speech")
        self.input_details = input_details
        self.priority = priority
        self.source = source
        self._allow_interruptions = allow_interruptions
        self._phase = _Phase.CREATED
        self._interrupted = False
        self._num_steps = 1
        self._chat_items: list[ChatItem] = []
        self._error: BaseException | None = None
        self._done_callbacks: list[Callable[[SpeechHandle], Any]] = []
        self._item_callbacks: list[Callable[[ChatItem], Any]] = []
        self._done_event = Flag()
        self._scheduled_event = Flag()
        self._interrupted_event = Flag()
        self._new_step()

    def _new_step(self) -> None:
        # One scope, authorization and completion per generation step: a tool reply is a new
        # step of the same handle, scheduled again.
        self._step_scope = trio.CancelScope()
        # allocated now, so the step's message sorts by when the speech was asked for among
        # items created at the same Trio time
        self._step_message_id = new_item_id()
        self._authorized = Flag()
        self._generation_done = Flag()
        if self._interrupted:
            self._step_scope.cancel()

    # -- public -------------------------------------------------------------------------------
    @property
    def allow_interruptions(self) -> bool:
        return self._allow_interruptions

    @allow_interruptions.setter
    def allow_interruptions(self, value: bool) -> None:
        check_flag("allow_interruptions", value)
        if self._interrupted and not value:
            raise RuntimeError("cannot disallow interruptions on an interrupted speech")
        self._allow_interruptions = value

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    @property
    def scheduled(self) -> bool:
        return self._phase is not _Phase.CREATED

    @property
    def num_steps(self) -> int:
        return self._num_steps

    @property
    def chat_items(self) -> list[ChatItem]:
        return list(self._chat_items)

    def done(self) -> bool:
        return self._phase is _Phase.DONE

    def exception(self) -> BaseException | None:
        """The error of a failed model call of this speech (the first one wins)."""
        if not self.done():
            raise RuntimeError("the speech is not done")
        return self._error

    def interrupt(self, *, force: bool = False) -> SpeechHandle:
        """Interrupt the speech: its current step stops at the next checkpoint.

        Raises:
            RuntimeError: the speech does not allow interruptions and ``force`` is False.
        """
        if self.done() or self._interrupted:
            return self
        if not self._allow_interruptions and not force:
            raise RuntimeError("This speech handle does not allow interruptions")
        self._interrupted = True
        self._interrupted_event.set()
        self._step_scope.cancel()
        return self

    async def wait_for_interruption(self) -> None:
        """Wait until the speech is interrupted (forever if it never is).

        Cancellation: a checkpoint only.
        """
        await self._interrupted_event.wait()

    async def wait_for_playout(self) -> None:
        """Wait until the speech is done.

        Cancellation: a checkpoint; cancelling the wait does not affect the speech.
        """
        await self._done_event.wait()

    async def wait_if_not_interrupted(self, aw: Iterable[Awaitable[object]]) -> None:
        """Wait until every awaitable of ``aw`` is done, or until the speech is interrupted,
        whichever comes first (LiveKit's ``wait_if_not_interrupted``).

        The awaitables (coroutines, ``event.wait()``, ...) run in a nursery this call owns: an
        interruption ends the wait and cancels the ones still running, so no work outlives the
        call. As in LiveKit, an awaitable that fails does not raise here (its work is over);
        it is logged; keep what a coroutine produces in a variable it writes.

        Cancellation:
            Cancelling the wait cancels the awaitables still running; the speech is untouched.
        """
        pending = list(aw)
        if self._interrupted:
            for item in pending:
                _close_unstarted(item)
            return
        async with trio.open_nursery() as nursery:
            async def stop_on_interruption() -> None:
                await self._interrupted_event.wait()
                nursery.cancel_scope.cancel()

            async def run_all() -> None:
                async with trio.open_nursery() as work:
                    for item in pending:
                        work.start_soon(_swallow_failure, item)
                nursery.cancel_scope.cancel()

            nursery.start_soon(stop_on_interruption)
            nursery.start_soon(run_all)

    def __await__(self) -> Generator[Any, None, SpeechHandle]:
        async def _wait() -> SpeechHandle:
            await self._done_event.wait()
            return self

        return _wait().__await__()

    def add_done_callback(self, callback: Callable[[SpeechHandle], Any]) -> None:
        """Call ``callback(handle)`` once the speech is done (at once if it is). What it
        raises is logged, as asyncio logs a raising future callback: the speech, the other
        callbacks and the session go on.

        Raises:
            TypeError: ``callback`` is not callable.
        """
        if not callable(callback):
            raise TypeError(f"add_done_callback() takes a callable, got {callback!r}")
        if self.done():
            self._call_done_callback(callback)
        else:
            self._done_callbacks.append(callback)

    def _call_done_callback(self, callback: Callable[[SpeechHandle], Any]) -> None:
        try:
            callback(self)
        except Exception:
            logger.exception("done callback %r of speech %s raised", callback, self.id)

    def remove_done_callback(self, callback: Callable[[SpeechHandle], Any]) -> None:
        if callback in self._done_callbacks:
            self._done_callbacks.remove(callback)

    def __repr__(self) -> str:
        return (f"SpeechHandle(id={self.id!r}, phase={self._phase.value}, "
                f"interrupted={self._interrupted})")

    # -- runtime side (the activity and its generation steps; user code does not call these) --
    def next_step(self) -> None:
        """Start the next generation step (a tool reply): a new scope, authorization and
        completion, scheduled again."""
        self._num_steps += 1
        self._new_step()

    @property
    def step_scope(self) -> trio.CancelScope:
        """The cancel scope of the current generation step (interrupting cancels it)."""
        return self._step_scope

    @property
    def step_message_id(self) -> str:
        """The id of the assistant message the current step says."""
        return self._step_message_id

    @property
    def generation_done(self) -> bool:
        """The current step finished generating (it may still wait for its tools)."""
        return self._generation_done.is_set()

    def mark_scheduled(self) -> None:
        if self._phase is _Phase.CREATED:
            self._phase = _Phase.SCHEDULED
            self._scheduled_event.set()

    async def wait_scheduled(self) -> None:
        """Wait until the speech is scheduled (or done). Cancellation: a checkpoint; cancelling it changes nothing in the speech."""
        await self._scheduled_event.wait()

    def authorize(self) -> None:
        self._authorized.set()

    @property
    def authorized(self) -> bool:
        """The scheduler let the current step play (a tool reply's step is authorized anew)."""
        return self._authorized.is_set()

    async def wait_authorized(self) -> None:
        """Wait until the scheduler lets the current step play (or the speech is done).
        Cancellation: a checkpoint; cancelling it changes nothing in the speech."""
        await self._authorized.wait()

    def mark_generation_done(self) -> None:
        self._generation_done.set()

    async def wait_for_generation(self) -> None:
        """Wait until the current step finished generating (or the speech is done).
        Cancellation: a checkpoint; cancelling it changes nothing in the speech."""
        await self._generation_done.wait()

    def add_item(self, item: ChatItem) -> None:
        self._chat_items.append(item)
        for cb in list(self._item_callbacks):
            cb(item)

    def set_error(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error

    def mark_done(self) -> None:
        if self._phase is _Phase.DONE:
            return
        self._phase = _Phase.DONE
        self._scheduled_event.set()
        self._authorized.set()
        self._generation_done.set()
        self._done_event.set()
        callbacks, self._done_callbacks = self._done_callbacks, []
        for cb in callbacks:
            self._call_done_callback(cb)
