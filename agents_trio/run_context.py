"""RunContext: what a function tool gets to know about the call it serves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, Protocol, TypeVar

import trio

from .agent import SessionView
from .chat import FunctionCall
from .speech_handle import SpeechHandle
from .tools import ToolContext

Userdata_T = TypeVar("Userdata_T")

#: how a progress message reaches the model (``{function_name}``, ``{call_id}``, ``{message}``)
UPDATE_TEMPLATE = ("The tool `{function_name}` has updated, message: {message}\n"
                   "The task is still running, so DON'T make up or give information not "
                   "included in the message above.")


class ToolProgress(Protocol):
    """Where a running call's progress goes (the activity that runs it)."""

    def update(self, *, entry_id: str, message: str, output: object, silent: bool) -> None: ...


def render_template(template: str | Callable[[dict[str, Any]], str],
                    args: dict[str, Any]) -> str:
    """A ``str.format`` template filled with ``args``, or a callable's answer to them."""
    return template(args) if callable(template) else template.format(**args)


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
        by default :data:`UPDATE_TEMPLATE`) becomes the call's output, the model replies to it
        (without calling tools) and the tool goes on in the background. Each later update,
        and the value the tool finally returns, is recorded as a call of its own
        (``{call_id}_update_N``, ``{call_id}_final``) and voiced by one reply once the agent is
        idle. ``silent=True``: recorded for the model, no reply. Outside a session's tool
        dispatch the update is only counted.

        Cancellation: a checkpoint; the update was recorded before it.
        """
        raw = message if isinstance(message, str) else str(message)
        output: object = message
        if isinstance(message, str):
            output = render_template(template if template is not None else UPDATE_TEMPLATE,
                                     {"function_name": self.function_call.name,
                                      "call_id": self.function_call.call_id,
                                      "message": message})
        step, self._updates = self._updates, self._updates + 1
        call_id = self.function_call.call_id
        entry_id = call_id if step == 0 else f"{call_id}_update_{step}"
        if self._progress is not None:
            self._progress.update(entry_id=entry_id, message=raw, output=output, silent=silent)
        await trio.lowlevel.checkpoint()

    def __repr__(self) -> str:
        return f"RunContext(function_call={self.function_call!r})"
