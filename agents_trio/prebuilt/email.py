"""GetEmailTask: capture an email address (LiveKit's ``beta.workflows.GetEmailTask``)."""

from __future__ import annotations

import logging
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

logger = logging.getLogger("agents_trio")

EMAIL_REGEX = (r"^[A-Za-z0-9][A-Za-z0-9._%+\-]*@"
               r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}$")

PERSONA = ("Your only job, as one step of a larger system, is to get the user's email "
           "address.")

VOICE = """\
The user's words reach you as a speech transcription, which may be noisy; they say the \
address aloud. Turn spoken forms into symbols without comment: "dot" is `.`, "underscore" \
`_`, "dash" `-`, "plus" `+`, "at" `@`. A word followed by its spelling ("anna a n n a") \
means the spelled form. If you only heard the part before the @, ask for the domain. Drop \
fillers and hesitations, and fill in an obvious spelling ("tom b four four" is tomb44). \
Never point out the corrections you made."""

TEXT = """\
The user types the address. If it is nearly valid but something is missing (the @ or the \
domain), ask them about it."""

SPELLING = """\
Check the spelling each time: ask the user to confirm it, reading the address back one \
character at a time.
"""

TEMPLATE = """\
{persona}

{modality}

{spelling}Call `update_email_address` as soon as you have a new guess at the address, \
before you say or ask anything else. Use only what the user said; never make up an address.
{confirmation}
If the address is unclear or wrong, or it takes too many attempts, ask for it in two \
parts: the part before the @, then (only if needed) the domain.

Stay on this task: no markdown, no greetings, no small talk. A tool does something only \
when you actually call it, so call it rather than describing the call.

{extra}
"""


@dataclass
class GetEmailResult:
    email_address: str


class GetEmailTask(CaptureTask[GetEmailResult]):
    """Ask for the user's email address; completes with a :class:`GetEmailResult`.

    Tools the model sees: ``update_email_address(email)``, then (when a confirmation is
    required) ``confirm_email_address()``, and ``decline_email_capture(reason)``, which
    fails the task with a ``ToolError``.

    Args:
        instructions: Replace the task's instructions entirely (then ``extra_instructions``
            is ignored, with a warning).
        require_confirmation: Ask the user to confirm before completing; by default only
            when the conversation is spoken (see ``agents_trio.prebuilt._capture``).
        require_explicit_ask: Hide ``update_email_address`` while the task greets, so an
            address mentioned earlier is not taken without asking.
        verify_spelling: Always confirm, reading the address back letter by letter.
        extra_instructions: Appended to the default instructions.
        chat_ctx, turn_detection, tools, stt, vad, llm, tts, allow_interruptions: As for
            ``AgentTask``.
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
                 require_explicit_ask: bool = False, verify_spelling: bool = False,
                 extra_instructions: str = "") -> None:
        check_task_args(
            flags={"require_confirmation": require_confirmation,
                   "require_explicit_ask": require_explicit_ask,
                   "verify_spelling": verify_spelling},
            strs={"instructions": instructions, "extra_instructions": extra_instructions})
        extra_tools = task_tools(tools)
        if isinstance(instructions, str):
            if extra_instructions:
                logger.warning("extra_instructions is ignored when instructions is given")
            voice = text = instructions
        else:
            voice, text = (self._render(modality, require_confirmation, verify_spelling,
                                        extra_instructions, spoken)
                           for modality, spoken in ((VOICE, True), (TEXT, False)))
        self._current = ""
        update = self._update_tool(require_explicit_ask)
        super().__init__(
            voice_instructions=voice, text_instructions=text,
            ask_prompt=("Ask the user for their email address. If they already gave one "
                        "earlier in the conversation, record it with update_email_address "
                        "instead of asking again."),
            confirm_tool="confirm_email_address",
            require_confirmation=require_confirmation, verify_spelling=verify_spelling,
            tools=[*extra_tools, update,
                   decline_tool(name="decline_email_capture", what="email address",
                                task=self)],
            chat_ctx=chat_ctx, turn_detection=turn_detection, stt=stt, vad=vad, llm=llm,
            tts=tts, allow_interruptions=allow_interruptions)

    @staticmethod
    def _render(modality: str, require_confirmation: bool | NotGiven, verify_spelling: bool,
                extra: str, spoken: bool) -> str:
        # as LiveKit: confirmation is on by default when spoken, off when typed
        confirm = verify_spelling or (require_confirmation is not False if spoken
                                      else require_confirmation is True)
        return TEMPLATE.format(
            persona=PERSONA, modality=modality, spelling=SPELLING if verify_spelling else "",
            confirmation=(CONFIRM_RULE.format(subject="email address",
                                              tool="confirm_email_address")
                          if confirm else ""),
            extra=extra)

    def _update_tool(self, require_explicit_ask: bool) -> FunctionTool:
        async def update_email_address(email: str) -> str | None:
            """Record the email address the user gave.

            Args:
                email: The email address the user gave
            """
            return await self._update(email)

        return function_tool(update_email_address, flags=update_flags(require_explicit_ask))

    async def _update(self, email: str) -> str | None:
        email = email.strip()
        if not re.match(EMAIL_REGEX, email):
            raise ToolError(f"Invalid email address provided: {email}")
        self._current = email
        if not self.confirmation_required():
            self.finish(GetEmailResult(email_address=email))
            return None
        return await self.ask_to_confirm(
            lambda: confirm_tool(name="confirm_email_address", subject="email address",
                                 asked=email, current=lambda: self._current,
                                 finish=lambda: self.finish(GetEmailResult(email_address=email))),
            now=f"The email address is now {email}",
            read_back="Read the address back to the user.",
            spelled=f"Read it back one character at a time: {' '.join(email)}")
