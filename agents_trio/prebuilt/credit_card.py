"""GetCreditCardTask: card number, expiry, security code and cardholder name, one step at a
time (LiveKit's ``beta.workflows.GetCreditCardTask``).

The steps run in a :class:`~agents_trio.workflows.TaskGroup`, so the user can go back to an
earlier one. In every step, ``decline_card_capture(reason)`` fails the whole task with a
:class:`CardCaptureDeclinedError` and ``restart_card_collection(reason)`` starts the steps over
(a new card). Sensitive values are never read back: to confirm, the user repeats them and the
``confirm_…`` tool compares.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from .._errors import ToolError
from ..agent import NOT_GIVEN, NotGiven
from ..agent_task import AgentTask
from ..chat import ChatContext
from ..models import LLM, STT, TTS, VAD
from ..realtime import RealtimeModel
from ..tools import FunctionTool, ToolFlag, function_tool
from ..workflows import TaskGroup
from ._capture import (CaptureTask, check_task_args, task_tools, turn_handling_for,
                       update_flags)
from .name import GetNameResult, GetNameTask

#: the issuer by the card number's first digit
CARD_ISSUERS_LOOKUP = {"3": "American Express", "4": "Visa", "5": "Mastercard", "6": "Discover"}

STEP_TEMPLATE = """\
You are one step of collecting the user's card details: your only job is the {what}.

{modality}
If the user will not give it, call decline_card_capture(). If they want to start again \
with the card details (another card), call restart_card_collection().
Ask in a natural conversational way, without lists or numbered questions.
Never say the {what} or any other card detail back to the user.
{confirmation}{extra}"""

CONFIRM_STEP = "Call `{tool}` once the user has repeated the {what}.\n"

VOICE_DIGITS = """\
The words are a speech transcription and may be noisy; the user reads the {what} one digit \
at a time. Write spoken digits as numerals ("oh" is 0) and drop fillers, without comment."""

TEXT_DIGITS = """\
The user types the {what}, possibly with spaces or dashes."""

VOICE_EXPIRY = """\
The words are a speech transcription and may be noisy. People say expiry dates as "May \
twenty-eight", "oh five twenty-eight", "five slash twenty-eight" or "May 2028": turn months \
and digits into numbers and drop fillers, without comment."""

TEXT_EXPIRY = """\
The user types the expiry date, e.g. 05/28, 05/2028 or May 2028."""

CARDHOLDER_EXTRA = (
    "The name you are collecting is the one on the card (the cardholder). When you check a "
    "name from earlier in the conversation, make clear that you mean the name on the card, "
    "not just 'is it [name]?'.")


@dataclass
class GetCreditCardResult:
    cardholder_name: str
    issuer: str
    card_number: str
    security_code: str
    expiration_date: str


@dataclass
class GetCardNumberResult:
    issuer: str
    card_number: str


@dataclass
class GetSecurityCodeResult:
    security_code: str


@dataclass
class GetExpirationDateResult:
    date: str


class CardCaptureDeclinedError(ToolError):
    """The user declined to give a card detail."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"couldn't get the card details: {reason}")
        self.reason = reason


class CardCollectionRestartError(ToolError):
    """The user wants to start the card details over."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"starting over: {reason}")
        self.reason = reason


def luhn_valid(card_number: str) -> bool:
    """The Luhn checksum of a string of digits."""
    if not card_number.isdigit():
        return False
    total = 0
    for index, char in enumerate(reversed(card_number)):
        digit = int(char) * (2 if index % 2 else 1)
        total += digit - 9 if digit > 9 else digit
    return total % 10 == 0


def _card_step_tools(task: AgentTask[Any]) -> list[FunctionTool]:
    """``decline_card_capture`` and ``restart_card_collection`` for one step's task."""

    async def decline_card_capture(reason: str) -> None:
        """Call when the user clearly refuses to give a card detail.

        Args:
            reason: Why the user declined, in a few words
        """
        if not task.done():
            task.complete(CardCaptureDeclinedError(reason))

    async def restart_card_collection(reason: str) -> None:
        """Call when the user wants to start the card details over, with another card.

        Args:
            reason: Why the user wants to start over, in a few words
        """
        if not task.done():
            task.complete(CardCollectionRestartError(reason))

    return [function_tool(decline_card_capture, flags=ToolFlag.IGNORE_ON_ENTER),
            function_tool(restart_card_collection, flags=ToolFlag.IGNORE_ON_ENTER)]


class _CardStep(CaptureTask[Any]):
    def __init__(self, *, what: str, voice: str, text: str, ask_prompt: str, confirm_tool: str,
                 update: FunctionTool, chat_ctx: ChatContext | NotGiven,
                 require_confirmation: bool | NotGiven, extra_instructions: str) -> None:
        extra = f"\n{extra_instructions}" if extra_instructions else ""
        voice_text, text_text = (STEP_TEMPLATE.format(
            what=what, modality=modality, extra=extra,
            confirmation=CONFIRM_STEP.format(tool=confirm_tool, what=what) if confirm else "")
            for modality, confirm in ((voice, require_confirmation is not False),
                                      (text, require_confirmation is True)))
        super().__init__(
            voice_instructions=voice_text, text_instructions=text_text, ask_prompt=ask_prompt,
            confirm_tool=confirm_tool, require_confirmation=require_confirmation,
            tools=[update, *_card_step_tools(self)], chat_ctx=chat_ctx,
            turn_detection=NOT_GIVEN, stt=NOT_GIVEN, vad=NOT_GIVEN, llm=NOT_GIVEN,
            tts=NOT_GIVEN, allow_interruptions=NOT_GIVEN)


def _ask(what: str, tool: str) -> str:
    return (f"Get the user's {what}. Look through the conversation first: if they already "
            f"gave it (before this step started), record it with {tool} instead of asking "
            "again. Ask only when the conversation does not have it yet.")


class GetCardNumberTask(_CardStep):
    """The card number step: ``update_card_number(card_number)`` (13 to 19 digits, Luhn
    checked), ``confirm_card_number(repeated_card_number)``."""

    def __init__(self, *, chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 require_confirmation: bool | NotGiven = NOT_GIVEN,
                 require_explicit_ask: bool = False, extra_instructions: str = "") -> None:
        check_task_args(flags={"require_confirmation": require_confirmation,
                               "require_explicit_ask": require_explicit_ask},
                        strs={"extra_instructions": extra_instructions})
        self._number = ""

        async def update_card_number(card_number: str) -> str | None:
            """Record the card number. Call only once the whole number was given, not part by part.

            Args:
                card_number: The card number, digits only (no spaces or dashes)
            """
            return await self._update(card_number)

        what = "card number"
        super().__init__(
            what=what, voice=VOICE_DIGITS.format(what=what), text=TEXT_DIGITS.format(what=what),
            ask_prompt=_ask("credit card number", "update_card_number"),
            confirm_tool="confirm_card_number",
            update=function_tool(update_card_number, flags=update_flags(require_explicit_ask)),
            chat_ctx=chat_ctx, require_confirmation=require_confirmation,
            extra_instructions=extra_instructions)

    def _complete_with(self, number: str) -> str | None:
        if not luhn_valid(number):
            return ("The card number is not valid: ask the user whether they made a mistake, "
                    "or for another card.")
        self.finish(GetCardNumberResult(issuer=CARD_ISSUERS_LOOKUP.get(number[0], "Other"),
                                        card_number=number))
        return None

    async def _update(self, card_number: str) -> str | None:
        digits = "".join(d for d in card_number if d.isdigit())
        if not 13 <= len(digits) <= 19:
            return "The card number has the wrong length: ask the user to say it again."
        self._number = digits
        if not self.confirmation_required():
            return self._complete_with(digits)
        await self.install_confirmation(lambda: self._confirm_tool(digits))
        return ("The card number is recorded.\n"
                "Ask the user to repeat it; do not say it back to them.\n")

    def _confirm_tool(self, number: str) -> FunctionTool:
        async def confirm_card_number(repeated_card_number: str) -> str | None:
            """Call once the user has repeated their card number, to check it.

            Args:
                repeated_card_number: The card number as the user repeated it
            """
            repeated = "".join(d for d in repeated_card_number if d.isdigit())
            if repeated != number:
                return "The repeated card number does not match: ask the user to try again."
            return self._complete_with(number)

        return function_tool(confirm_card_number)


class GetSecurityCodeTask(_CardStep):
    """The security code step: ``update_security_code(security_code)`` (3 or 4 digits),
    ``confirm_security_code(repeated_security_code)``."""

    def __init__(self, *, chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 require_confirmation: bool | NotGiven = NOT_GIVEN,
                 require_explicit_ask: bool = False, extra_instructions: str = "") -> None:
        check_task_args(flags={"require_confirmation": require_confirmation,
                               "require_explicit_ask": require_explicit_ask},
                        strs={"extra_instructions": extra_instructions})
        async def update_security_code(security_code: str) -> str | None:
            """Record the card's security code.

            Args:
                security_code: The card's security code: 3 or 4 digits, leading zeros kept
            """
            return await self._update(security_code)

        what = "card's security code"
        super().__init__(
            what=what, voice=VOICE_DIGITS.format(what=what), text=TEXT_DIGITS.format(what=what),
            ask_prompt=_ask("card security code", "update_security_code"),
            confirm_tool="confirm_security_code",
            update=function_tool(update_security_code, flags=update_flags(require_explicit_ask)),
            chat_ctx=chat_ctx, require_confirmation=require_confirmation,
            extra_instructions=extra_instructions)

    async def _update(self, security_code: str) -> str | None:
        code = security_code.strip()
        if not code.isdigit() or not 3 <= len(code) <= 4:
            return ("The security code has the wrong length: ask the user to say it again, or "
                    "for another card and start over.")
        if not self.confirmation_required():
            self.finish(GetSecurityCodeResult(security_code=code))
            return None
        await self.install_confirmation(lambda: self._confirm_tool(code))
        return ("The security code is recorded.\n"
                "Do not say it back: ask the user to repeat it.\n"
                "Call `confirm_security_code` once they have, not before.\n")

    def _confirm_tool(self, code: str) -> FunctionTool:
        async def confirm_security_code(repeated_security_code: str) -> str | None:
            """Call once the user has repeated their security code, to check it.

            Args:
                repeated_security_code: The security code as the user repeated it
            """
            if repeated_security_code.strip() != code:
                return "The repeated security code does not match: ask the user to try again."
            self.finish(GetSecurityCodeResult(security_code=code))
            return None

        return function_tool(confirm_security_code)


class GetExpirationDateTask(_CardStep):
    """The expiry step: ``update_expiration_date(expiration_month, expiration_year)`` (a
    two-digit year; an expired card is refused), ``confirm_expiration_date(
    repeated_expiration_month, repeated_expiration_year)``; the result reads ``MM/YY``."""

    def __init__(self, *, chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 require_confirmation: bool | NotGiven = NOT_GIVEN,
                 require_explicit_ask: bool = False, extra_instructions: str = "") -> None:
        check_task_args(flags={"require_confirmation": require_confirmation,
                               "require_explicit_ask": require_explicit_ask},
                        strs={"extra_instructions": extra_instructions})
        async def update_expiration_date(expiration_month: int,
                                         expiration_year: int) -> str | None:
            """Record the card's expiry date; get both the month and the year as numbers.

            Args:
                expiration_month: The expiry month as a number, e.g. 4 for April
                expiration_year: The expiry year's last two digits, e.g. 31 for 2031
            """
            return await self._update(expiration_month, expiration_year)

        super().__init__(
            what="card's expiration date", voice=VOICE_EXPIRY, text=TEXT_EXPIRY,
            ask_prompt=_ask("card expiration date", "update_expiration_date"),
            confirm_tool="confirm_expiration_date",
            update=function_tool(update_expiration_date,
                                 flags=update_flags(require_explicit_ask)),
            chat_ctx=chat_ctx, require_confirmation=require_confirmation,
            extra_instructions=extra_instructions)

    async def _update(self, month: int, year: int) -> str | None:
        if not 1 <= month <= 12:
            return "The expiry month is not valid: ask the user to say the month again."
        if not 0 <= year <= 99:
            return "The expiry year is not valid: ask the user to say the year again."
        today = date.today()
        if (2000 + year, month) < (today.year, today.month):
            return "The card has expired: ask the user for another card."
        text = f"{month:02d}/{year:02d}"
        if not self.confirmation_required():
            self.finish(GetExpirationDateResult(date=text))
            return None
        await self.install_confirmation(lambda: self._confirm_tool(month, year, text))
        return ("The expiry date is recorded.\n"
                "Do not say it back: ask the user to repeat it.\n"
                "Call `confirm_expiration_date` once they have, not before.\n")

    def _confirm_tool(self, month: int, year: int, text: str) -> FunctionTool:
        async def confirm_expiration_date(repeated_expiration_month: int,
                                          repeated_expiration_year: int) -> str | None:
            """Call once the user has repeated their card's expiry date, to check it.

            Args:
                repeated_expiration_month: The expiry month as the user repeated it
                repeated_expiration_year: The expiry year as the user repeated it
            """
            if (repeated_expiration_month, repeated_expiration_year) != (month, year):
                return "The repeated expiry date does not match: ask the user to try again."
            self.finish(GetExpirationDateResult(date=text))
            return None

        return function_tool(confirm_expiration_date)


class GetCreditCardTask(AgentTask[GetCreditCardResult]):
    """Collect a card: number, expiry, security code, then the cardholder's name (first and
    last, asked for explicitly); completes with a :class:`GetCreditCardResult`. A restart
    request starts the steps over; a decline (or another step failure) fails the task with
    that error.
    """

    def __init__(self, chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 turn_detection: Any = NOT_GIVEN,  # noqa: ANN401 - a mode or a detector
                 tools: list[FunctionTool] | NotGiven = NOT_GIVEN,
                 stt: STT | None | NotGiven = NOT_GIVEN, vad: VAD | None | NotGiven = NOT_GIVEN,
                 llm: LLM | RealtimeModel | None | NotGiven = NOT_GIVEN,
                 tts: TTS | None | NotGiven = NOT_GIVEN,
                 allow_interruptions: bool | NotGiven = NOT_GIVEN,
                 require_confirmation: bool | NotGiven = NOT_GIVEN,
                 extra_instructions: str = "") -> None:
        check_task_args(flags={"require_confirmation": require_confirmation},
                        strs={"extra_instructions": extra_instructions})
        super().__init__(
            instructions="*none*", chat_ctx=None if isinstance(chat_ctx, NotGiven) else chat_ctx,
            tools=task_tools(tools), stt=stt, vad=vad, llm=llm, tts=tts,
            turn_handling=turn_handling_for(turn_detection),
            allow_interruptions=(None if isinstance(allow_interruptions, NotGiven)
                                 else allow_interruptions))
        self._require_confirmation = require_confirmation
        self._extra_instructions = extra_instructions

    def _group(self, ctx: ChatContext) -> TaskGroup:
        confirm, extra = self._require_confirmation, self._extra_instructions
        cardholder = f"{extra}\n\n{CARDHOLDER_EXTRA}" if extra else CARDHOLDER_EXTRA
        group = TaskGroup(chat_ctx=ctx)
        # the name last: it is the detail most often already in the conversation, and asking
        # it first invites the digits the user gives next into update_name
        group.add(lambda: GetCardNumberTask(chat_ctx=ctx, require_confirmation=confirm,
                                            extra_instructions=extra),
                  id="card_number_task", description="Collects the user's card number")
        group.add(lambda: GetExpirationDateTask(chat_ctx=ctx, require_confirmation=confirm,
                                                extra_instructions=extra),
                  id="expiration_date_task", description="Collects the card's expiration date")
        group.add(lambda: GetSecurityCodeTask(chat_ctx=ctx, require_confirmation=confirm,
                                              extra_instructions=extra),
                  id="security_code_task", description="Collects the card's security code")
        group.add(lambda: GetNameTask(last_name=True, chat_ctx=ctx, extra_instructions=cardholder,
                                      require_confirmation=confirm, require_explicit_ask=True),
                  id="cardholder_name_task", description="Collects the cardholder's full name")
        return group

    async def on_enter(self) -> None:
        """Run the steps until the card is complete, declined or a step fails.

        Cancellation: cancelling it (the session closes) cancels the step being awaited; the
        task does not complete.
        """
        ctx = self.chat_ctx.copy()
        while not self.done():
            try:
                results = (await self._group(ctx)).task_results
            except CardCollectionRestartError:
                continue
            except ToolError as e:
                self.complete(e)
                return
            name: GetNameResult = results["cardholder_name_task"]
            number: GetCardNumberResult = results["card_number_task"]
            self.complete(GetCreditCardResult(
                cardholder_name=f"{name.first_name} {name.last_name}", issuer=number.issuer,
                card_number=number.card_number,
                security_code=results["security_code_task"].security_code,
                expiration_date=results["expiration_date_task"].date))
