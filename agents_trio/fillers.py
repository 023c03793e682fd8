"""Fillers: what the agent says while a tool keeps the user waiting (``RunContext.with_filler``).

A filler runs while its ``with`` block is open, in a nursery of the tool's own task. Each time
it waits for the agent to be idle, then for ``delay`` seconds of quiet (the agent speaking or
thinking, the user speaking, or the tool reporting progress start the quiet over), then says its
source. With ``interval`` it rests that long and starts again, at most ``max_steps`` times; it
stops for good when the speech that called the tool is interrupted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Union

import logging

import trio

from ._errors import SessionClosedError
from .nurseries import EventFanout
from .options import check_non_negative
from .speech_handle import SpeechHandle

logger = logging.getLogger("agents_trio")

__all__ = ["Filler", "FillerSource", "filler_running"]

#: a text to say, or ``step -> SpeechHandle | str | None`` (None: nothing this time)
FillerSource = Union[str, Callable[[int], Union[SpeechHandle, str, None]]]


def check_filler_args(source: object, *, delay: object, interval: object,
                      max_steps: object) -> None:
    """``with_filler``'s arguments, checked where it is called (a NaN delay or interval
    used to kill the filler's task later, leaving the tool without its filler)."""
    check_non_negative("delay", delay)
    check_non_negative("interval", interval, allow_none=True)
    if max_steps is not None and (isinstance(max_steps, bool)
                                  or not isinstance(max_steps, int)):
        raise TypeError(f"max_steps must be an int or None, got {max_steps!r}")
    if max_steps is not None and max_steps < 1:
        raise ValueError("max_steps must be at least 1 when set")
    if not (isinstance(source, str) or callable(source)):
        raise TypeError("source must be a str or a callable taking the step number")


class Filler:
    """One filler of a tool call (see the module docs)."""

    def __init__(self, source: FillerSource, *, delay: float, interval: float | None,
                 max_steps: int | None, say: Callable[[str], SpeechHandle],
                 wait_idle: Callable[[], Awaitable[object]]) -> None:
        check_filler_args(source, delay=delay, interval=interval, max_steps=max_steps)
        self._source = source
        self._delay = delay
        self._interval = interval
        self._max_steps = max_steps
        self._say = say
        self._wait_idle = wait_idle
        self._quiet_broken = trio.Event()
        self.speeches: list[SpeechHandle] = []

    def reset_dwell(self) -> None:
        """Something happened: the quiet before the next filler starts over."""
        self._quiet_broken.set()

    def on_agent_state(self, ev: Any) -> None:  # noqa: ANN401 - an AgentStateChangedEvent
        if ev.new_state in ("speaking", "thinking"):
            self.reset_dwell()

    def on_user_state(self, ev: Any) -> None:  # noqa: ANN401 - a UserStateChangedEvent
        if ev.new_state == "speaking":
            self.reset_dwell()

    def follow_states(self, events: EventFanout, *, listen: bool) -> None:
        """Start (``listen``) or stop hearing the user and agent state changes of a
        session's ``events``: each breaks the quiet before the next filler."""
        if listen:
            events.on("agent_state_changed", self.on_agent_state)
            events.on("user_state_changed", self.on_user_state)
        else:
            events.off("agent_state_changed", self.on_agent_state)
            events.off("user_state_changed", self.on_user_state)

    async def run(self) -> None:
        """Say the filler as often as it is due (see the module docs).

        Cancellation: stops; speeches already asked for go on.
        """
        while True:
            await self._wait_idle()
            self._quiet_broken = trio.Event()
            with trio.move_on_after(self._delay) as quiet:
                await self._quiet_broken.wait()
            if not quiet.cancelled_caught:
                continue  # the quiet was broken: wait for idle and a full delay again
            self._fire()
            if self._interval is None or (self._max_steps is not None
                                          and len(self.speeches) >= self._max_steps):
                return
            await trio.sleep(self._interval)

    def _fire(self) -> None:
        source = self._source
        made = source if isinstance(source, str) else source(len(self.speeches))
        handle = self._say(made) if isinstance(made, str) else made
        if handle is not None:
            self.speeches.append(handle)


@asynccontextmanager
async def filler_running(filler: Filler, speech: SpeechHandle) -> AsyncIterator[Filler]:
    """Run ``filler`` while the body runs, until ``speech`` is interrupted.

    Cancellation: the filler stops with the body.
    """
    async def until_interrupted() -> None:
        async with trio.open_nursery() as inner:
            async def run_then_stop() -> None:
                try:
                    await filler.run()
                except SessionClosedError:
                    logger.debug("filler stopped: the agent left")
                except Exception:  # a filler's failure is not the tool's: report it, stop
                    logger.exception("filler stopped on an error; no further filler will "
                                     "play for this tool call")
                inner.cancel_scope.cancel()
            inner.start_soon(run_then_stop)
            await speech.wait_for_interruption()
            inner.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(until_interrupted)
        try:
            yield filler
        finally:
            nursery.cancel_scope.cancel()
