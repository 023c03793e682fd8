"""GetPhoneNumberTask: capture a phone number (LiveKit's
``beta.workflows.GetPhoneNumberTask``)."""

from __future__ import annotations

import re
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

#: an optional +, then 7 to 15 digits not starting with 0 (E.164's shape)
PHONE_REGEX = r"^\+?[1-9]\d{6,14}$"

TEMPLATE = """\
Your only job, as one step of a larger system, is to get the user's phone number.

{modality}
Call `update_phone_number` as soon as you have a new guess at the number, before you say or \
ask anything else. Use only what the user said; never make up a number.
{confirmation}
If the number is unclear or wrong, or it takes too many attempts, ask for it in two parts: \
the area code, then the rest.
Never read the number back as one long run of digits: read it in groups.
Stay on this task: no markdown, no greetings, no small talk, and no example numbers or \
formats unless the user asks. A tool does something only when you actually call it, so \
call it rather than describing the call.{extra}
"""

VOICE = """\
The words are a speech transcription and may be noisy. People say numbers in many ways: \
"415 555 0134", "four one five, five five five, zero one three four", "+44 20 7946 0958", \
"area code 415, 555 0134". Without comment, write spoken digits as numerals ("oh" is 0), \
drop fillers, remove dashes, spaces, brackets and dots, read a leading "plus" as `+` and \
"area code" as the start of the number. Never point out corrections.
"""

TEXT = """\
The user types the number. Remove dashes, spaces, brackets and dots, and quietly fix small \
formatting slips.
"""


@dataclass
class GetPhoneNumberResult:
    phone_number: str


class GetPhoneNumberTask(CaptureTask[GetPhoneNumberResult]):
    """Ask for the user's phone number; completes with a :class:`GetPhoneNumberResult`
    (digits with an optional leading ``+``).

    Tools: ``update_phone_number(phone_number)``, ``confirm_phone_number()`` (when a
    confirmation is required), ``decline_phone_number_capture(reason)``.
    """

    def __init__(self, extra_instructions: str = "",
                 chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 turn_detection: Any = NOT_GIVEN,  # noqa: ANN401 - a mode or a detector
                 tools: list[FunctionTool] | NotGiven = NOT_GIVEN,
                 stt: STT | None | NotGiven = NOT_GIVEN, vad: VAD | None | NotGiven = NOT_GIVEN,
                 llm: LLM | RealtimeModel | None | NotGiven = NOT_GIVEN,
                 tts: TTS | None | NotGiven = NOT_GIVEN,
                 allow_interruptions: bool | NotGiven = NOT_GIVEN,
                 require_confirmation: bool | NotGiven = NOT_GIVEN,
                 require_explicit_ask: bool = False) -> None:
        check_task_args(flags={"require_confirmation": require_confirmation,
                               "require_explicit_ask": require_explicit_ask},
                        strs={"extra_instructions": extra_instructions})
        extra_tools = task_tools(tools)
        extra = f"\n{extra_instructions}" if extra_instructions else ""
        voice, text = (TEMPLATE.format(
            modality=modality, extra=extra,
            confirmation=(CONFIRM_RULE.format(subject="phone number", tool="confirm_phone_number")
                          if confirm else ""))
            for modality, confirm in ((VOICE, require_confirmation is not False),
                                      (TEXT, require_confirmation is True)))
        self._current = ""
        super().__init__(
            voice_instructions=voice, text_instructions=text,
            ask_prompt=("Ask the user for their phone number. If they already gave one earlier "
                        "in the conversation, record it with update_phone_number instead of "
                        "asking again."),
            confirm_tool="confirm_phone_number", require_confirmation=require_confirmation,
            tools=[*extra_tools, self._update_tool(require_explicit_ask),
                   decline_tool(name="decline_phone_number_capture", what="phone number",
                                task=self)],
            chat_ctx=chat_ctx, turn_detection=turn_detection, stt=stt, vad=vad, llm=llm,
            tts=tts, allow_interruptions=allow_interruptions)

    def _update_tool(self, require_explicit_ask: bool) -> FunctionTool:
        async def update_phone_number(phone_number: str) -> str | None:
            """Record the phone number the user gave.

            Args:
                phone_number: The number the user gave: digits only, with an optional leading +
            """
            return await self._update(phone_number)

        return function_tool(update_phone_number, flags=update_flags(require_explicit_ask))

    async def _update(self, phone_number: str) -> str | None:
        cleaned = re.sub(r"[\s\-().]+", "", phone_number.strip())
        if not re.match(PHONE_REGEX, cleaned):
            raise ToolError(f"Invalid phone number provided: {phone_number}")
        self._current = cleaned
        if not self.confirmation_required():
            self.finish(GetPhoneNumberResult(phone_number=cleaned))
            return None
        return await self.ask_to_confirm(
            lambda: confirm_tool(
                name="confirm_phone_number", subject="phone number", asked=cleaned,
                current=lambda: self._current,
                finish=lambda: self.finish(GetPhoneNumberResult(phone_number=cleaned))),
            now=f"The phone number is now {cleaned}",
            read_back="Read the number back to the user in groups.",
            spelled=f"Read the number back one digit at a time: {' '.join(cleaned)}")
