"""What the prebuilt capture tasks (email, address, name, …) have in common.

Each task keeps one hypothesis of the value the user gave. An ``update_…`` tool records it;
when a confirmation is required, it also installs a ``confirm_…`` tool bound to that exact
value (so the model cannot confirm before it asked, and a confirmation of a value replaced
since says so instead of completing), and a ``decline_…_capture`` tool completes the task
with a ``ToolError`` carrying the user's reason. The shared pieces are here:
:meth:`CaptureTask.ask_to_confirm` (install the confirm tool and write the read-back request,
spelled out from the second attempt on), :func:`confirm_tool` (the tool bound to a value) and
:func:`decline_tool`.

Confirmation: as in LiveKit, one is asked for by default when the turn the tool answers
was spoken (``speech_handle.input_details.modality == "audio"``) and not when it was typed;
``require_confirmation=True`` / ``False`` overrides that. The instructions differ for voice
and text too: the task's instructions are an :class:`~agents_trio.instructions.Instructions`
with both, and each reply renders the one for its turn's modality.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .._errors import ToolError
from ..agent import NOT_GIVEN, NotGiven
from ..agent_task import AgentTask
from ..chat import ChatContext
from ..instructions import Instructions
from ..models import LLM, STT, TTS, VAD
from ..realtime import RealtimeModel
from ..speech_args import check_flag, check_str
from ..tools import FunctionTool, ToolFlag, function_tool

T = TypeVar("T")

#: the sentence telling the model how to finish a capture that needs a confirmation
CONFIRM_RULE = "Once the user says the {subject} is right, call `{tool}`."


def check_task_args(*, flags: dict[str, object] | None = None,
                    strs: dict[str, object] | None = None) -> None:
    """A prebuilt task's bools and strings (each may also be ``NOT_GIVEN``), checked at
    construction: a truthy ``"no"`` would turn an option on, a wrong type be ignored.

    Raises:
        TypeError: naming the argument.
    """
    for name, value in (flags or {}).items():
        if not isinstance(value, NotGiven):
            check_flag(name, value)
    for name, value in (strs or {}).items():
        if not isinstance(value, NotGiven):
            check_str(name, value)


def task_tools(tools: object) -> list[Any]:
    """A prebuilt task's extra ``tools``: a list or tuple (None or ``NOT_GIVEN``: none), as
    LiveKit's ``[*(tools or []), ...]`` takes them; the tools themselves are checked by the
    agent."""
    if tools is None or isinstance(tools, NotGiven):
        return []
    if not isinstance(tools, (list, tuple)):
        raise TypeError(f"tools must be a list of tools, got {tools!r}")
    return list(tools)


def update_flags(require_explicit_ask: bool) -> ToolFlag:
    """``require_explicit_ask``: the update tool is hidden while the task greets (on_enter),
    so the model must ask before it records anything from earlier in the conversation."""
    return ToolFlag.IGNORE_ON_ENTER if require_explicit_ask else ToolFlag.NONE


def turn_handling_for(turn_detection: Any) -> dict[str, Any] | None:  # noqa: ANN401
    """LiveKit's ``turn_detection=`` as this runtime's ``turn_handling`` layer."""
    if isinstance(turn_detection, NotGiven):
        return None
    return {"turn_detection": turn_detection}


class CaptureTask(AgentTask[T]):
    """An ``AgentTask`` capturing one value, with the confirmation flow described above.

    Subclasses give the voice and text instructions, the prompt ``on_enter`` speaks with,
    and the name of the confirm tool; their update tool calls :meth:`record`.
    """

    def __init__(self, *, voice_instructions: str, text_instructions: str, ask_prompt: str,
                 confirm_tool: str, require_confirmation: bool | NotGiven,
                 verify_spelling: bool = False, tools: list[FunctionTool],
                 chat_ctx: ChatContext | NotGiven | None, turn_detection: Any,  # noqa: ANN401
                 stt: STT | None | NotGiven, vad: VAD | None | NotGiven,
                 llm: LLM | RealtimeModel | None | NotGiven, tts: TTS | None | NotGiven,
                 allow_interruptions: bool | NotGiven) -> None:
        self._voice_instructions = voice_instructions
        self._text_instructions = text_instructions
        self._ask_prompt = ask_prompt
        self._confirm_tool_name = confirm_tool
        self._require_confirmation = require_confirmation
        self._verify_spelling = verify_spelling
        #: read the value back spelled out (with spelling checks, and from the second attempt)
        self._spell_read_back = verify_spelling
        super().__init__(
            instructions=(voice_instructions if voice_instructions == text_instructions else
                          Instructions("", audio=voice_instructions, text=text_instructions)),
            chat_ctx=None if isinstance(chat_ctx, NotGiven) else chat_ctx,
            tools=tools, stt=stt, vad=vad, llm=llm, tts=tts,
            turn_handling=turn_handling_for(turn_detection),
            allow_interruptions=(None if isinstance(allow_interruptions, NotGiven)
                                 else allow_interruptions))

    @property
    def spoken(self) -> bool:
        """Whether the turn being answered was spoken: the modality of the speech whose
        tools run now (a tool of this task calls this); without one, whether a TTS speaks
        the task's replies."""
        speech = self.session.current_speech
        if speech is not None:
            return speech.input_details.modality == "audio"
        tts = self.tts
        return (tts is not None) if not isinstance(tts, NotGiven) else (
            self.session.tts is not None)

    def confirmation_required(self) -> bool:
        if self._verify_spelling:
            return True
        if not isinstance(self._require_confirmation, NotGiven):
            return self._require_confirmation
        return self.spoken

    async def on_enter(self) -> None:
        """Ask the user (the instructions render for each turn's modality).

        Cancellation: not a checkpoint; the reply is scheduled, not awaited.
        """
        self.session.generate_reply(instructions=self._ask_prompt)

    async def install_confirmation(self, make_tool: Callable[[], FunctionTool]) -> None:
        """Replace the confirm tool by a fresh one bound to the current hypothesis.

        Cancellation: not a checkpoint.
        """
        tools = [t for t in self.tools if t.name != self._confirm_tool_name]
        await self.update_tools([*tools, make_tool()])

    async def ask_to_confirm(self, make_tool: Callable[[], FunctionTool], *, now: str,
                             read_back: str, spelled: str) -> str:
        """Install the confirm tool and return the tool output asking the model to read the
        value back (``spelled`` once a first read-back was asked for) and get it confirmed.

        Cancellation: not a checkpoint.
        """
        await self.install_confirmation(make_tool)
        how = spelled if self._spell_read_back else read_back
        self._spell_read_back = True  # a second attempt is spelled out
        return (f"{now}\n{how}\n"
                f"Ask the user to confirm it; do not call `{self._confirm_tool_name}` yourself")

    def finish(self, result: T) -> None:
        if not self.done():
            self.complete(result)


def confirm_tool(*, name: str, subject: str, asked: object, current: Callable[[], object],
                 finish: Callable[[], str | None]) -> FunctionTool:
    """The ``confirm_…`` tool bound to the hypothesis ``asked``: if ``current()`` differs
    (an update ran after it was installed, e.g. parallel calls) it says so; else it returns
    what ``finish()`` returns (None once the task completed)."""
    async def confirm() -> str | None:
        if asked != current():
            return (f"The {subject} changed after the confirmation was asked for; ask the user "
                    "to confirm the new one.")
        return finish()

    confirm.__doc__ = f"Call once the user has said the {subject} is right."
    confirm.__name__ = confirm.__qualname__ = name  # the schema's title is built from it
    return function_tool(confirm, name=name)


def decline_tool(*, name: str, what: str, task: AgentTask[Any]) -> FunctionTool:
    """The ``decline_…_capture`` tool: the user refuses to give ``what``; the awaiter gets a
    ``ToolError`` with the reason. Hidden while the task greets, as in LiveKit."""
    async def decline(reason: str) -> None:
        if not task.done():
            task.complete(ToolError(f"couldn't get the {what}: {reason}"))

    decline.__doc__ = (f"Call when the user clearly refuses to give their {what}.\n\n"
                       f"Args:\n    reason: Why the user declined, in a few words\n")
    return function_tool(decline, name=name, flags=ToolFlag.IGNORE_ON_ENTER)


__all__ = ["CONFIRM_RULE", "NOT_GIVEN", "CaptureTask", "confirm_tool", "decline_tool",
           "turn_handling_for", "update_flags"]
