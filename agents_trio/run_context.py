"""RunContext: what a function tool gets to know about the call it serves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Generic, Protocol, TypeVar

import trio

from .agent import SessionView
from .chat import FunctionCall
from .fillers import Filler, FillerSource, check_filler_args
from .speech_args import check_flag
from .speech_handle import SpeechHandle
from .tool_handling import UPDATE_TEMPLATE, render_template
from .tools import ToolContext

Userdata_T = TypeVar("Userdata_T")

class ToolProgress(Protocol):
    """Where a running call's progress goes (the activity that runs it)."""

    @property
    def update_template(self) -> str | Callable[[Any], str]:
        """How a string given to ``update()`` without a ``template`` is wrapped."""
        ...

    def update(self, *, entry_id: str, message: str, output: object, silent: bool) -> None: ...

    def foreground(self) -> AbstractAsyncContextManager[Any]: ...

    def filler(self, source: FillerSource, *, delay: float, interval: float | None,
               max_steps: int | None) -> AbstractAsyncContextManager[Filler]: ...


class RunContext(ToolContext, Generic[Userdata_T]):
    """Passed to tools that declare a parameter typed ``RunContext``; never shown to the LLM.

    Attributes:
        session: The session running the tool.
        speech_handle: The speech whose LLM step produced the call.
        function_call: The call being executed.
    """

    def __init__(self, *, session: SessionView, speech_handle: SpeechHandle,
                 function_call: FunctionCall, progress: ToolProgress | None = None) -> None:
        self.session = session
        self.speech_handle = speech_handle
        self.function_call = function_call
        self._progress = progress
        self._updates = 0
        self._fillers: list[Filler] = []

    @property
    def userdata(self) -> Userdata_T:
        return self.session.userdata  # type: ignore[no-any-return]  # the user's type

    def disallow_interruptions(self) -> None:
        """Make the rest of this speech uninterruptible (RuntimeError if already interrupted)."""
        self.speech_handle.allow_interruptions = False

    async def wait_for_playout(self) -> None:
        """Wait until the generation step that produced this call finished playing.

        Cancellation: a checkpoint; cancelling it does not affect the speech.
        """
        await self.speech_handle.wait_for_generation()

    async def update(self, message: object, *,
                     template: str | Callable[[dict[str, Any]], str] | None = None,
                     silent: bool = False) -> None:
        """Report progress; the tool keeps running.

        The first update answers the call: its message (a string is wrapped in ``template``,
        by default the ``update_template`` of ``tool_handling``, :data:`UPDATE_TEMPLATE` unless
        set) becomes the call's output, the model replies to it
        (without calling tools) and the tool goes on in the background. Each later update,
        and the value the tool finally returns, is recorded as a call of its own
        (``{call_id}_update_N``, ``{call_id}_final``) and voiced by one reply once the agent is
        idle. ``silent=True``: recorded for the model, no reply. Outside a session's tool
        dispatch the update is only counted.

        Cancellation: a checkpoint; the update was recorded before it.
        """
        if template is not None and not (isinstance(template, str) or callable(template)):
            raise TypeError("template must be a str or a callable taking the fields, got "
                            f"{template!r}")
        check_flag("silent", silent)
        for filler in self._fillers:  # the tool just spoke up: fillers wait a full delay again
            filler.reset_dwell()
        raw = message if isinstance(message, str) else str(message)
        output: object = message
        if isinstance(message, str):
            if template is None:
                template = (self._progress.update_template if self._progress is not None
                            else UPDATE_TEMPLATE)
            output = render_template(template,
                                     {"function_name": self.function_call.name,
                                      "call_id": self.function_call.call_id,
                                      "message": message})
        step, self._updates = self._updates, self._updates + 1
        call_id = self.function_call.call_id
        entry_id = call_id if step == 0 else f"{call_id}_update_{step}"
        if self._progress is not None:
            self._progress.update(entry_id=entry_id, message=raw, output=output, silent=silent)
        await trio.lowlevel.checkpoint()

    @asynccontextmanager
    async def foreground(self) -> AsyncIterator[Any]:
        """Wait until the session's current agent is idle, then hold the floor for the body
        (yields that agent's activity). As in LiveKit, the current agent is followed: the
        AgentTask this tool's agent awaits, or the agent it handed off to. No other ``foreground()`` body, deferred tool reply or filler starts
        until it ends. Use it around an ``await AgentTask()``, a ``say`` / ``generate_reply``,
        or several of them, so they do not race the agent's own speech. A deferred reply
        already due for this agent's background tools is asked for first.

        Cancellation: cancelling the wait or the body releases the floor.

        Raises:
            RuntimeError: outside a session's tool dispatch.
            SessionClosedError: the session closes.
        """
        if self._progress is None:
            raise RuntimeError("foreground() needs the tool to run in a session")
        async with self._progress.foreground() as activity:
            yield activity

    @asynccontextmanager
    async def with_filler(self, source: FillerSource, *, delay: float = 0,
                          interval: float | None = None, max_steps: int | None = None
                          ) -> AsyncIterator[None]:
        """Say ``source`` while the body keeps the user waiting.

        While the block runs, the filler waits for the session's current agent to be idle and then for
        ``delay`` seconds of quiet (the agent speaking or thinking, the user speaking or an
        ``update()`` start the quiet over), and says ``source`` (``session.say``), or calls it
        with the number of fillers said so far: it returns a SpeechHandle, a text to say, or
        None to say nothing this time. With ``interval`` it rests that long and goes again
        (at most ``max_steps`` fillers in all); without, it says at most one. It stops when the
        speech that called the tool is interrupted, and when the block ends.

        Cancellation: the filler stops with the body; fillers already said go on.

        Raises:
            ValueError: a negative ``delay`` or ``interval``, or ``max_steps`` below 1.
            RuntimeError: outside a session's tool dispatch.
        """
        check_filler_args(source, delay=delay, interval=interval, max_steps=max_steps)
        if self._progress is None:
            raise RuntimeError("with_filler() needs the tool to run in a session")
        async with self._progress.filler(source, delay=delay, interval=interval,
                                         max_steps=max_steps) as filler:
            self._fillers.append(filler)
            try:
                yield
            finally:
                self._fillers.remove(filler)

    def __repr__(self) -> str:
        return f"RunContext(function_call={self.function_call!r})"
