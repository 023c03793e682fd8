"""GetAddressTask: capture a postal address (LiveKit's ``beta.workflows.GetAddressTask``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..agent import NOT_GIVEN, NotGiven
from ..chat import ChatContext
from ..models import LLM, STT, TTS, VAD
from ..realtime import RealtimeModel
from ..tools import FunctionTool, function_tool
from ._capture import (CONFIRM_RULE, CaptureTask, check_task_args, confirm_tool,
                       decline_tool, task_tools, update_flags)

logger = logging.getLogger("agents_trio")

PERSONA = "Your only job, as one step of a larger system, is to get the user's address."

VOICE = """\
Addresses may be from any country. Map what the user says onto the fields, for example:
- street_address '221 KING ST W', unit_number 'SUITE 300', locality 'TORONTO ON M5H 1K5', \
country 'CANADA'
- street_address '10 DOWNING STREET', unit_number '', locality 'LONDON SW1A 2AA', country \
'UNITED KINGDOM'
- street_address '1-1 CHIYODA', unit_number 'ROOM 5', locality 'CHIYODA-KU TOKYO 100-0001', \
country 'JAPAN'
The words are a speech transcription and may be noisy. Without comment, turn "dash" into \
`-` and "apostrophe" into `'`, write spoken numbers as digits, take a word followed by its \
spelling as the spelled form, drop fillers, and keep accents the user names or that the \
place usually has (check them with the user). Never point out corrections.
When reading back, say ordinals as words ("twenty-first", not "21 s t"), read postal codes \
one digit at a time ("nine zero two one zero"), spell street and province names when the \
user spelled them, and use no bullet points or parentheses."""

TEXT = """\
Addresses may be from any country; the user types theirs. If it is nearly complete but \
something is missing (the country, the postal code), ask about it."""

TEMPLATE = """\
{persona}

{modality}

Call `update_address` as soon as you have a new guess at the address, before you say or \
ask anything else. Use only what the user said; never make up an address.
{confirmation}
If the address is unclear or wrong, or it takes too many attempts, ask for it piece by \
piece: street address, unit number (if any), locality, country.

Stay on this task: no markdown, no greetings, no small talk. A tool does something only \
when you actually call it, so call it rather than describing the call.

{extra}
"""


@dataclass
class GetAddressResult:
    address: str


class GetAddressTask(CaptureTask[GetAddressResult]):
    """Ask for the user's address; completes with a :class:`GetAddressResult` (the fields
    joined by spaces, the unit number left out when empty).

    Tools: ``update_address(street_address, unit_number, locality, country)``,
    ``confirm_address()`` (when a confirmation is required), ``decline_address_capture
    (reason)``. Arguments as :class:`~agents_trio.prebuilt.email.GetEmailTask` (no
    ``verify_spelling``).
    """

    def __init__(self, *, instructions: str | NotGiven = NOT_GIVEN,
                 chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 turn_detection: Any = NOT_GIVEN,  # noqa: ANN401 - a mode or a detector
                 tools: list[FunctionTool] | NotGiven = NOT_GIVEN,
                 stt: STT | None | NotGiven = NOT_GIVEN, vad: VAD | None | NotGiven = NOT_GIVEN,
                 llm: LLM | RealtimeModel | None | NotGiven = NOT_GIVEN,
                 tts: TTS | None | NotGiven = NOT_GIVEN,
                 allow_interruptions: bool | NotGiven = NOT_GIVEN,
                 require_confirmation: bool | NotGiven = NOT_GIVEN,
                 require_explicit_ask: bool = False, extra_instructions: str = "") -> None:
        check_task_args(
            flags={"require_confirmation": require_confirmation,
                   "require_explicit_ask": require_explicit_ask},
            strs={"instructions": instructions, "extra_instructions": extra_instructions})
        extra_tools = task_tools(tools)
        if isinstance(instructions, str):
            if extra_instructions:
                logger.warning("extra_instructions is ignored when instructions is given")
            voice = text = instructions
        else:
            voice, text = (TEMPLATE.format(
                persona=PERSONA, modality=modality, extra=extra_instructions,
                confirmation=(CONFIRM_RULE.format(subject="address", tool="confirm_address")
                              if confirm else ""))
                for modality, confirm in ((VOICE, require_confirmation is not False),
                                          (TEXT, require_confirmation is True)))
        self._current = ""
        super().__init__(
            voice_instructions=voice, text_instructions=text,
            ask_prompt=("Ask the user for their address. If they already gave one earlier in "
                        "the conversation, record it with update_address instead of asking "
                        "again."),
            confirm_tool="confirm_address", require_confirmation=require_confirmation,
            tools=[*extra_tools, self._update_tool(require_explicit_ask),
                   decline_tool(name="decline_address_capture", what="address", task=self)],
            chat_ctx=chat_ctx, turn_detection=turn_detection, stt=stt, vad=vad, llm=llm,
            tts=tts, allow_interruptions=allow_interruptions)

    def _update_tool(self, require_explicit_ask: bool) -> FunctionTool:
        async def update_address(street_address: str, unit_number: str, locality: str,
                                 country: str) -> str | None:
            """Record the address the user gave.

            Args:
                street_address: Depends on the country: house number, street name, block or district
                unit_number: The unit, e.g. Floor 1 or Apartment 12; '' when there is none
                locality: Depends on the country: city, postal code, province or state
                country: The user's country, written out in full
            """
            return await self._update(street_address, unit_number, locality, country)

        return function_tool(update_address, flags=update_flags(require_explicit_ask))

    async def _update(self, street_address: str, unit_number: str, locality: str,
                      country: str) -> str | None:
        fields = ([street_address, unit_number, locality, country] if unit_number.strip()
                  else [street_address, locality, country])
        address = " ".join(fields)
        self._current = address
        if not self.confirmation_required():
            self.finish(GetAddressResult(address=address))
            return None
        spelled_street = " ".join(street_address.replace(" ", ""))
        return await self.ask_to_confirm(
            lambda: confirm_tool(name="confirm_address", subject="address", asked=address,
                                 current=lambda: self._current,
                                 finish=lambda: self.finish(GetAddressResult(address=address))),
            now=f"The address is now {address}",
            read_back="Read the address back to the user.",
            spelled=(f"Read it back field by field, spelling the street name one letter at a "
                     f"time: {[spelled_street, *fields[1:]]}"))
