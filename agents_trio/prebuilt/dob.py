"""GetDOBTask: capture a date of birth, optionally a time of birth (LiveKit's
``beta.workflows.GetDOBTask``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, time
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
Your only job, as one step of a larger system, is to get the user's date of birth.

{modality}
{time}Call `update_dob` as soon as you have a new guess at the date, before you say or ask \
anything else. Use only what the user said; never make up a date. A two-digit year means \
the most recent past century that makes sense ("90" is 1990, "05" is 2005).
{confirmation}
If the date is unclear, or it takes too many attempts, ask for it piece by piece: month, \
day, year.
Stay on this task: no markdown, no greetings, no small talk. A tool does something only \
when you actually call it, so call it rather than describing the call.{extra}
"""

VOICE = """\
The words are a speech transcription and may be noisy. People say dates in many ways: \
"March fifth nineteen ninety", "the fifth of March 1990", "3/5/90", "March 5th, 90". \
Without comment, turn spoken numbers and month names into numbers and drop fillers. Never \
point out corrections.
"""

TEXT = """\
The user types the date, in any common format (03/05/1990, 1990-03-05, March 5 1990). If \
it is ambiguous (is 03/05 March or May?), ask which they meant.
"""

TIME_RULE = ("Ask for the time of birth as well, if the user knows it; it is optional, so go "
             "on without it when they do not.\n")


@dataclass
class GetDOBResult:
    date_of_birth: date
    time_of_birth: time | None = None


class GetDOBTask(CaptureTask[GetDOBResult]):
    """Ask for the user's date of birth; completes with a :class:`GetDOBResult`.

    Tools: ``update_dob(year, month, day)`` (a future date, or an impossible one, is a tool
    error), ``update_time(hour, minute)`` when ``include_time``, ``confirm_dob()`` (when a
    confirmation is required), ``decline_dob_capture(reason)``.
    """

    def __init__(self, extra_instructions: str = "", include_time: bool = False,
                 chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 turn_detection: Any = NOT_GIVEN,  # noqa: ANN401 - a mode or a detector
                 tools: list[FunctionTool] | NotGiven = NOT_GIVEN,
                 stt: STT | None | NotGiven = NOT_GIVEN, vad: VAD | None | NotGiven = NOT_GIVEN,
                 llm: LLM | RealtimeModel | None | NotGiven = NOT_GIVEN,
                 tts: TTS | None | NotGiven = NOT_GIVEN,
                 allow_interruptions: bool | NotGiven = NOT_GIVEN,
                 require_confirmation: bool | NotGiven = NOT_GIVEN,
                 require_explicit_ask: bool = False) -> None:
        check_task_args(flags={"include_time": include_time,
                               "require_confirmation": require_confirmation,
                               "require_explicit_ask": require_explicit_ask},
                        strs={"extra_instructions": extra_instructions})
        extra_tools = task_tools(tools)
        extra = f"\n{extra_instructions}" if extra_instructions else ""
        voice, text = (TEMPLATE.format(
            modality=modality, extra=extra, time=TIME_RULE if include_time else "",
            confirmation=(CONFIRM_RULE.format(subject="date of birth", tool="confirm_dob")
                          if confirm else ""))
            for modality, confirm in ((VOICE, require_confirmation is not False),
                                      (TEXT, require_confirmation is True)))
        self._include_time = include_time
        self._dob: date | None = None
        self._time: time | None = None
        own = [self._update_dob_tool(require_explicit_ask)]
        if include_time:
            own.append(self._update_time_tool())
        prompt = ("Ask the user for their date of birth and, if they know it, their time of "
                  "birth." if include_time else "Ask the user for their date of birth.")
        super().__init__(
            voice_instructions=voice, text_instructions=text, ask_prompt=prompt,
            confirm_tool="confirm_dob", require_confirmation=require_confirmation,
            tools=[*extra_tools, *own,
                   decline_tool(name="decline_dob_capture", what="date of birth", task=self)],
            chat_ctx=chat_ctx, turn_detection=turn_detection, stt=stt, vad=vad, llm=llm,
            tts=tts, allow_interruptions=allow_interruptions)

    def _collected(self) -> GetDOBResult:
        assert self._dob is not None
        return GetDOBResult(date_of_birth=self._dob, time_of_birth=self._time)

    def _update_dob_tool(self, require_explicit_ask: bool) -> FunctionTool:
        async def update_dob(year: int, month: int, day: int) -> str | None:
            """Record the date of birth the user gave, as numbers (a spoken "July 1990" is month 7, year 1990).

            Args:
                year: The year of birth (e.g. 1990)
                month: The month of birth, 1 to 12
                day: The day of birth, 1 to 31
            """
            return await self._update_dob(year, month, day)

        return function_tool(update_dob, flags=update_flags(require_explicit_ask))

    async def _update_dob(self, year: int, month: int, day: int) -> str | None:
        today = date.today()
        if 0 <= year < 100:  # a two-digit year: the latest century not in the future
            year += 2000 if year <= today.year % 100 else 1900
        try:
            dob = date(year, month, day)
        except ValueError as e:
            raise ToolError(f"Invalid date: {e}") from None
        if dob > today:
            raise ToolError(f"Invalid date of birth: {dob.strftime('%B %d, %Y')} is in the "
                            "future. A date of birth cannot be in the future.")
        self._dob = dob
        if not self.confirmation_required():
            self.finish(self._collected())
            return None
        reply = f"The date of birth is now {dob.strftime('%B %d, %Y')}"
        if self._time is not None:
            reply += f" at {self._time.strftime('%I:%M %p')}"
        return await self.ask_to_confirm(
            self._confirm_tool, now=reply,
            read_back="Read the date back to the user the way people say dates.",
            spelled=(f"Read the date back one part at a time, month, day, then year: "
                     f"{dob.strftime('%B')}, {dob.day}, {dob.year}"))

    def _update_time_tool(self) -> FunctionTool:
        async def update_time(hour: int, minute: int) -> str | None:
            """Record the time of birth the user gave.

            Args:
                hour: The hour of birth, 0 to 23
                minute: The minute of birth, 0 to 59
            """
            return await self._update_time(hour, minute)

        return function_tool(update_time)

    async def _update_time(self, hour: int, minute: int) -> str | None:
        try:
            birth_time = time(hour, minute)
        except ValueError as e:
            raise ToolError(f"Invalid time: {e}") from None
        self._time = birth_time
        confirm = self.confirmation_required()
        if not confirm and self._dob is not None:
            self.finish(self._collected())
            return None
        if confirm:
            await self.install_confirmation(self._confirm_tool)
        said = birth_time.strftime("%I:%M %p")
        reply = f"The time of birth is now {said}"
        if self._dob is not None:
            reply = (f"The date and time of birth are now {self._dob.strftime('%B %d, %Y')} "
                     f"at {said}")
        if confirm:
            return (f"{reply}\nRead the time back to the user the way people say times.\n"
                    "Ask the user to confirm it; do not call `confirm_dob` yourself")
        return f"{reply}\nThe date of birth is still missing: ask the user for it."

    def _confirm_tool(self) -> FunctionTool:
        def finish() -> str | None:
            if self._dob is None:
                return "The user has not given a date of birth yet: ask for it."
            self.finish(self._collected())
            return None

        return confirm_tool(name="confirm_dob", subject="date of birth",
                            asked=(self._dob, self._time),
                            current=lambda: (self._dob, self._time), finish=finish)
