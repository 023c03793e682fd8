"""GetDtmfTask: collect keypad digits (DTMF) or spoken digits (LiveKit's
``beta.workflows.GetDtmfTask``).

Keypad presses arrive as the room's ``sip_dtmf_received`` events (the job's room, through
``get_job_context()``). A press of the stop key answers at once; otherwise the answer waits
until no key was pressed for ``dtmf_input_timeout`` seconds. The wait is held off while the
user speaks or the agent is thinking or speaking, and starts again once they stop. The timer
runs in one task of the task's activity, which ``on_exit`` cancels: it never outlives the
task.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass
from typing import Any

import trio

from .._errors import ToolError
from ..agent import NOT_GIVEN, NotGiven
from ..agent_task import AgentTask
from ..chat import ChatContext
from ..events import AgentStateChangedEvent, UserStateChangedEvent
from ..job import get_job_context
from ..options import check_non_negative
from ..speech_args import check_flag, check_str
from ..tools import function_tool

logger = logging.getLogger("agents_trio")


class DtmfEvent(str, enum.Enum):
    """A telephone keypad key."""

    ONE = "1"
    TWO = "2"
    THREE = "3"
    FOUR = "4"
    FIVE = "5"
    SIX = "6"
    SEVEN = "7"
    EIGHT = "8"
    NINE = "9"
    ZERO = "0"
    STAR = "*"
    POUND = "#"
    A = "A"
    B = "B"
    C = "C"
    D = "D"


def dtmf_event_to_code(event: DtmfEvent) -> int:
    """The DTMF event code of a key: digits are themselves, * is 10, # is 11, A–D 12–15."""
    if event.value.isdigit():
        return int(event.value)
    return {"*": 10, "#": 11}.get(event.value, ord(event.value) - ord("A") + 12)


def format_dtmf(events: list[DtmfEvent]) -> str:
    return " ".join(DtmfEvent(e).value for e in events)


@dataclass
class GetDtmfResult:
    user_input: str

    @classmethod
    def from_dtmf_inputs(cls, dtmf_inputs: list[DtmfEvent]) -> GetDtmfResult:
        return cls(user_input=format_dtmf(dtmf_inputs))


INSTRUCTIONS = (
    "Your only job, as one step of a larger system, is to get a sequence of digits from the "
    "user. They either press keys on their phone, which reach you as <dtmf_inputs> tags, or "
    "say the digits; handle both. ")
CONFIRM_RULE = ("Once the user has confirmed the digits (by voice or on the keypad), call "
                "`confirm_inputs` with them.")
RECORD_RULE = "When the user says a valid sequence of digits, call `record_inputs` with it."


class GetDtmfTask(AgentTask[GetDtmfResult]):
    """Collect ``num_digits`` digits; completes with a :class:`GetDtmfResult` (the digits
    separated by spaces), or a ``ToolError`` when the keypad input stopped short.

    Args:
        num_digits: How many digits to collect.
        ask_for_confirmation: Read the digits back and wait for the user's confirmation
            (the ``confirm_inputs`` tool) instead of completing at once (``record_inputs``).
        dtmf_input_timeout: Seconds without a key press after which the input is taken as
            finished.
        dtmf_stop_event: The key that finishes the input at once.
        chat_ctx: The conversation the task starts from.
        extra_instructions: Appended to the instructions.

    Raises:
        ValueError: ``num_digits`` is not positive, or the timeout is negative.
    """

    def __init__(self, *, num_digits: int, ask_for_confirmation: bool = False,
                 dtmf_input_timeout: float = 4.0, dtmf_stop_event: DtmfEvent = DtmfEvent.POUND,
                 chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 extra_instructions: str | NotGiven = NOT_GIVEN) -> None:
        if isinstance(num_digits, bool) or not isinstance(num_digits, int):
            raise TypeError(f"num_digits must be an int, got {num_digits!r}")
        if num_digits <= 0:
            raise ValueError("num_digits must be greater than 0")
        check_non_negative("dtmf_input_timeout", dtmf_input_timeout)  # NaN too
        check_flag("ask_for_confirmation", ask_for_confirmation)
        if not isinstance(extra_instructions, NotGiven):
            check_str("extra_instructions", extra_instructions)
        self._num_digits = num_digits
        self._confirm = ask_for_confirmation
        self._timeout = dtmf_input_timeout
        self._stop_key = DtmfEvent(dtmf_stop_event)
        self._digits: list[DtmfEvent] = []
        self._deadline = math.inf  # when the keypad input counts as finished
        self._replying = False     # key presses and state changes are ignored meanwhile
        self._changed = trio.Event()
        self._timer_scope = trio.CancelScope()
        self._room: Any = None

        async def confirm_inputs(inputs: list[DtmfEvent]) -> None:
            """Finish with the digits once the user confirmed them. Use ONLY after reading the digits back one by one and hearing the user confirm; never to record the first input.

            Args:
                inputs: The confirmed digits
            """
            self._finish(GetDtmfResult.from_dtmf_inputs(inputs))

        async def record_inputs(inputs: list[DtmfEvent]) -> None:
            """Finish with the digits, without a confirmation. Call as soon as the user gave a valid sequence of digits (keypad or voice).

            Args:
                inputs: The digits the user gave
            """
            self._finish(GetDtmfResult.from_dtmf_inputs(inputs))

        instructions = INSTRUCTIONS + (CONFIRM_RULE if ask_for_confirmation else RECORD_RULE)
        if isinstance(extra_instructions, str):
            instructions += f"\n{extra_instructions}"
        super().__init__(
            instructions=instructions,
            chat_ctx=None if isinstance(chat_ctx, NotGiven) else chat_ctx,
            tools=[function_tool(confirm_inputs if ask_for_confirmation else record_inputs)])

    def dtmf_reply_running(self) -> bool:
        """Whether the task is answering a keypad input right now."""
        return self._replying

    def _finish(self, result: GetDtmfResult | BaseException) -> None:
        if not self.done():
            self.complete(result)

    # -- the room's and the session's events (plain callbacks) --------------------------------
    def _schedule(self, deadline: float) -> None:
        self._deadline = deadline
        self._changed.set()

    def _on_sip_dtmf_received(self, ev: Any) -> None:  # noqa: ANN401 - rtc.SipDTMF
        if self._replying:
            return
        if ev.digit == self._stop_key.value:
            self._schedule(-math.inf)  # answer now
            return
        try:
            self._digits.append(DtmfEvent(ev.digit))
        except ValueError:
            logger.warning("ignoring an unknown DTMF key %r", ev.digit)
            return
        self._schedule(trio.current_time() + self._timeout)

    def _on_user_state_changed(self, ev: UserStateChangedEvent) -> None:
        self._hold_while(ev.new_state == "speaking")

    def _on_agent_state_changed(self, ev: AgentStateChangedEvent) -> None:
        self._hold_while(ev.new_state in ("speaking", "thinking"))

    def _hold_while(self, busy: bool) -> None:
        if self._replying:
            return
        if busy:
            self._schedule(math.inf)
        elif self._digits:
            self._schedule(trio.current_time() + self._timeout)

    # -- the timer ----------------------------------------------------------------------------
    async def _run_timer(self) -> None:
        with self._timer_scope:
            while True:
                self._changed = trio.Event()
                with trio.move_on_at(self._deadline) as waited:
                    await self._changed.wait()
                if waited.cancelled_caught:
                    self._deadline = math.inf
                    await self._answer()

    async def _answer(self) -> None:
        self._replying = True
        try:
            await self.session.interrupt()
            digits = format_dtmf(self._digits)
            if len(self._digits) != self._num_digits:
                self._finish(ToolError(f"Digits input not fully received. Expect "
                                       f"{self._num_digits} digits, got {len(self._digits)}"))
                return
            if not self._confirm:
                self._finish(GetDtmfResult.from_dtmf_inputs(self._digits))
                return
            await self.session.generate_reply(user_input=(
                "The user typed these digits on the phone keypad:\n"
                f"<dtmf_inputs>{digits}</dtmf_inputs>\n"
                "Read them back one at a time with pauses between them (e.g. 'four, two, "
                "seven') and ask whether they are right. Once the user agrees, call "
                "`confirm_inputs` with them."))
        finally:
            self._replying = False
            self._digits.clear()

    # -- hooks --------------------------------------------------------------------------------
    async def on_enter(self) -> None:
        """Listen for key presses and state changes, start the timer, and ask the user.

        Cancellation: not a checkpoint; the reply is scheduled, not awaited.
        """
        job = get_job_context(required=False)
        if job is None:
            logger.warning("GetDtmfTask runs outside a job: no keypad input (only spoken "
                           "digits) reaches it")
        else:
            self._room = job.room
            self._room.on("sip_dtmf_received", self._on_sip_dtmf_received)
        self.session.on("user_state_changed", self._on_user_state_changed)
        self.session.on("agent_state_changed", self._on_agent_state_changed)
        self._require_activity().start_soon(self._run_timer)
        self.session.generate_reply(tool_choice="none")

    async def on_exit(self) -> None:
        """Stop listening and stop the timer.

        Cancellation: not a checkpoint.
        """
        if self._room is not None:
            self._room.off("sip_dtmf_received", self._on_sip_dtmf_received)
            self._room = None
        self.session.off("user_state_changed", self._on_user_state_changed)
        self.session.off("agent_state_changed", self._on_agent_state_changed)
        self._timer_scope.cancel()
