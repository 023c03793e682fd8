"""GetNameTask: capture the user's first, middle and/or last name (LiveKit's
``beta.workflows.GetNameTask``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._errors import ToolError
from ..agent import NOT_GIVEN, NotGiven
from ..chat import ChatContext
from ..models import LLM, STT, TTS, VAD
from ..realtime import RealtimeModel
from ..tools import FunctionTool, function_tool
from ._capture import (CONFIRM_RULE, CaptureTask, check_task_args, confirm_tool,
                       decline_tool, task_tools, update_flags)

TEMPLATE = """\
Your only job, as one step of a larger system, is to get the user's name, in the form \
'{name_format}' (do not tell the user about the form).

{modality}
{spelling}Call `update_name` as soon as you have a new guess at the name, before you say or \
ask anything else. Use only what the user said; never make up a name.
{confirmation}
If the name is unclear, or it takes too many attempts, ask for one part at a time.
Stay on this task: no markdown, no greetings, no small talk. A tool does something only \
when you actually call it, so call it rather than describing the call.{extra}
"""

VOICE = """\
The words are a speech transcription and may be noisy, and names are easily misheard. A \
name followed by its spelling ("Siobhan, s i o b h a n") means the spelled form. Drop \
fillers and hesitations. Never point out corrections.
"""

TEXT = """\
The user types their name. Keep its spelling and capitalisation as typed.
"""

SPELLING = ("Check the spelling each time: ask the user to confirm it, or to spell the name, "
            "reading each part back one letter at a time. ")

ASK = ("Get the user's name, in the order '{name_format}' (without mentioning the order). "
       "Look through the conversation first: if a name was already given, ask a short "
       "question to confirm it instead of asking from scratch, tied to what the name is for "
       "when that is known (the cardholder, the guest, the emergency contact), and say where "
       "in the conversation it came from. Ask afresh only when the conversation has no name "
       "yet.")

#: placeholder values some models put in optional arguments instead of leaving them out
_PLACEHOLDERS = ("null", "none", "nil", "n/a", "unknown", "unspecified")


def _clean(value: str | None) -> str | None:
    """None for a missing or placeholder value; the value without quotes or spaces else."""
    if value is None:
        return None
    value = value.strip().strip("'\"")
    if not value or value.casefold() in _PLACEHOLDERS:
        return None
    return value


@dataclass
class GetNameResult:
    first_name: str | None = None
    middle_name: str | None = None
    last_name: str | None = None


class GetNameTask(CaptureTask[GetNameResult]):
    """Ask for the user's name; completes with a :class:`GetNameResult` holding the parts
    asked for (the others are None).

    Tools: ``update_name(first_name=, middle_name=, last_name=)`` (a part asked for that is
    missing, or a part without a letter, is a tool error), ``confirm_name()`` (when a
    confirmation is required), ``decline_name_capture(reason)``.

    Args:
        first_name, middle_name, last_name: Which parts to ask for.
        name_format: How the parts read together (``"{last_name}, {first_name}"``); by
            default the parts asked for, in order, separated by spaces.
        verify_spelling: Always confirm, spelling the name back.

    Raises:
        ValueError: No part is asked for.
    """

    def __init__(self, first_name: bool = True, last_name: bool = False,
                 middle_name: bool = False, name_format: str | NotGiven = NOT_GIVEN,
                 verify_spelling: bool = False, extra_instructions: str = "",
                 chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 turn_detection: Any = NOT_GIVEN,  # noqa: ANN401 - a mode or a detector
                 tools: list[FunctionTool] | NotGiven = NOT_GIVEN,
                 stt: STT | None | NotGiven = NOT_GIVEN, vad: VAD | None | NotGiven = NOT_GIVEN,
                 llm: LLM | RealtimeModel | None | NotGiven = NOT_GIVEN,
                 tts: TTS | None | NotGiven = NOT_GIVEN,
                 allow_interruptions: bool | NotGiven = NOT_GIVEN,
                 require_confirmation: bool | NotGiven = NOT_GIVEN,
                 require_explicit_ask: bool = False) -> None:
        check_task_args(flags={"first_name": first_name, "last_name": last_name,
                               "middle_name": middle_name, "verify_spelling": verify_spelling,
                               "require_confirmation": require_confirmation,
                               "require_explicit_ask": require_explicit_ask},
                        strs={"name_format": name_format,
                              "extra_instructions": extra_instructions})
        extra_tools = task_tools(tools)
        if not (first_name or middle_name or last_name):
            raise ValueError("ask for at least one of first_name, middle_name, last_name")
        self._wanted = {"first": first_name, "middle": middle_name, "last": last_name}
        if isinstance(name_format, str):
            self._name_format = name_format
        else:
            self._name_format = " ".join(f"{{{part}_name}}" for part, on in self._wanted.items()
                                         if on)
        self._parts = {"first": "", "middle": "", "last": ""}
        extra = f"\n{extra_instructions}" if extra_instructions else ""
        voice, text = (TEMPLATE.format(
            name_format=self._name_format, modality=modality, extra=extra,
            spelling=SPELLING if verify_spelling else "",
            confirmation=(CONFIRM_RULE.format(subject="name", tool="confirm_name")
                          if confirm else ""))
            for modality, confirm in ((VOICE, require_confirmation is not False),
                                      (TEXT, require_confirmation is True)))
        super().__init__(
            voice_instructions=voice, text_instructions=text,
            ask_prompt=ASK.format(name_format=self._name_format),
            confirm_tool="confirm_name", require_confirmation=require_confirmation,
            tools=[*extra_tools, self._update_tool(require_explicit_ask),
                   decline_tool(name="decline_name_capture", what="name", task=self)],
            chat_ctx=chat_ctx, turn_detection=turn_detection, stt=stt, vad=vad, llm=llm,
            tts=tts, allow_interruptions=allow_interruptions)

    def _collected(self) -> GetNameResult:
        def part(key: str) -> str | None:
            return self._parts[key] if self._wanted[key] else None
        return GetNameResult(first_name=part("first"), middle_name=part("middle"),
                             last_name=part("last"))

    def _update_tool(self, require_explicit_ask: bool) -> FunctionTool:
        async def update_name(first_name: str | None = None, middle_name: str | None = None,
                              last_name: str | None = None) -> str | None:
            """Record the name the user gave.

            Args:
                first_name: The user's first name.
                middle_name: The user's middle name, when it is asked for.
                last_name: The user's last name, when it is asked for.
            """
            return await self._update({"first": first_name, "middle": middle_name,
                                       "last": last_name})

        return function_tool(update_name, flags=update_flags(require_explicit_ask))

    async def _update(self, given: dict[str, str | None]) -> str | None:
        cleaned = {key: _clean(value) for key, value in given.items()}
        errors = [f"{key} name is required but was not provided"
                  for key, wanted in self._wanted.items() if wanted and not cleaned[key]]
        errors += [f"{key} name {value!r} contains no letters - that doesn't look like a name"
                   for key, value in cleaned.items()
                   if value and not any(c.isalpha() for c in value)]
        if errors:
            raise ToolError(f"Incomplete name: {'; '.join(errors)}")
        self._parts = {key: value or "" for key, value in cleaned.items()}
        full = self._name_format.format(**{f"{k}_name": v for k, v in self._parts.items()})
        full = full.strip()
        if not self.confirmation_required():
            self.finish(self._collected())
            return None
        return await self.ask_to_confirm(
            self._confirm_tool, now=f"The name is now {full}",
            read_back="Read the name back to the user.",
            spelled=f"Spell the name back one letter at a time: {' '.join(full.replace(' ', ''))}")

    def _confirm_tool(self) -> FunctionTool:
        return confirm_tool(name="confirm_name", subject="name", asked=dict(self._parts),
                            current=lambda: self._parts,
                            finish=lambda: self.finish(self._collected()))
