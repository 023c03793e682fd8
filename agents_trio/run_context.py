"""RunContext: what a function tool gets to know about the call it serves."""

from __future__ import annotations

from typing import Generic, TypeVar

from .agent import SessionView
from .chat import FunctionCall
from .speech_handle import SpeechHandle
from .tools import ToolContext

Userdata_T = TypeVar("Userdata_T")


class RunContext(ToolContext, Generic[Userdata_T]):
    """Passed to tools that declare a parameter typed ``RunContext``; never shown to the LLM.

    Attributes:
        session: The session running the tool.
        speech_handle: The speech whose LLM step produced the call.
        function_call: The call being executed.
    """

    def __init__(self, *, session: SessionView, speech_handle: SpeechHandle,
                 function_call: FunctionCall) -> None:
        self.session = session
        self.speech_handle = speech_handle
        self.function_call = function_call

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

    def __repr__(self) -> str:
        return f"RunContext(function_call={self.function_call!r})"


