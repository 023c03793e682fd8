"""GetAddressTask, GetPhoneNumberTask, GetDOBTask, GetNameTask and GetCreditCardTask driven by
a scripted LLM: the tool names and arguments LiveKit's tasks use, and their results."""

from __future__ import annotations

from datetime import date, time

import pytest
import trio
from prebuilt_helpers import Parent, call, start_actions

from agents_trio import AgentSession
from agents_trio.beta.workflows import (GetAddressResult, GetAddressTask, GetCreditCardResult,
                                        GetCreditCardTask, GetDOBResult, GetDOBTask,
                                        GetNameResult, GetNameTask, GetPhoneNumberResult,
                                        GetPhoneNumberTask)
from agents_trio.prebuilt.credit_card import luhn_valid
from agents_trio.prebuilt.name import ASK as NAME_ASK
from agents_trio.testing import FakeActions, FakeLLM


async def _drive(parent: Parent, a: FakeActions, *turns: str) -> FakeLLM:
    llm = FakeLLM(a.llm_responses)
    async with AgentSession(llm=llm) as session:
        await session.start(parent)
        with trio.fail_after(60):
            await session.run(user_input="go")
            for turn in turns:
                await session.run(user_input=turn)
    return llm


def _ask(task: str) -> str:
    return {"address": ("Ask the user for their address. If they already gave one earlier in "
                        "the conversation, record it with update_address instead of asking "
                        "again."),
            "phone": ("Ask the user for their phone number. If they already gave one earlier "
                      "in the conversation, record it with update_phone_number instead of "
                      "asking again."),
            "dob": "Ask the user for their date of birth."}[task]


async def test_address_with_a_unit_and_confirmation(autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("Your address?", input=_ask("address"))
    a.add_llm("", tool_calls=call("update_address", "u1", street_address="12 Elm St",
                                  unit_number="Apt 4", locality="Springfield IL 62701",
                                  country="United States"), input="12 elm")
    a.add_llm("", tool_calls=call("confirm_address", "c1"), input="yes")
    a.add_llm("Is that right?", input=(
        "The address is now 12 Elm St Apt 4 Springfield IL 62701 United States\n"
        "Read the address back to the user.\n"
        "Ask the user to confirm it; do not call `confirm_address` yourself"))
    parent = Parent(lambda: GetAddressTask(require_confirmation=True))
    await _drive(parent, a, "12 elm", "yes")
    assert parent.results == [GetAddressResult(
        address="12 Elm St Apt 4 Springfield IL 62701 United States")]


async def test_phone_number_is_cleaned_and_validated(autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("", tool_calls=call("update_phone_number", "u1", phone_number="12"),
              input=_ask("phone"))
    a.add_llm("", tool_calls=call("update_phone_number", "u2",
                                  phone_number="+1 (415) 555-0134"),
              input="Invalid phone number provided: 12")
    parent = Parent(lambda: GetPhoneNumberTask(require_confirmation=False))
    await _drive(parent, a)
    assert parent.results == [GetPhoneNumberResult(phone_number="+14155550134")]


async def test_dob_two_digit_year_time_and_future_dates(autojump_clock: object) -> None:
    a = start_actions()
    ask = ("Ask the user for their date of birth and, if they know it, their time of birth.")
    a.add_llm("When were you born?", input=ask)
    future = date.today().year + 1
    a.add_llm("", tool_calls=call("update_dob", "u1", year=future, month=1, day=2),
              input="next year")
    a.add_llm("Again?", input=(f"Invalid date of birth: January 02, {future} is in the future."
                               " A date of birth cannot be in the future."))
    a.add_llm("", tool_calls=call("update_time", "t1", hour=7, minute=30), input="7:30")
    a.add_llm("And the date?", input=("The time of birth is now 07:30 AM\n"
                                      "The date of birth is still missing: ask the user for "
                                      "it."))
    a.add_llm("", tool_calls=call("update_dob", "u2", year=90, month=3, day=5), input="3/5/90")
    parent = Parent(lambda: GetDOBTask(include_time=True, require_confirmation=False))
    await _drive(parent, a, "next year", "7:30", "3/5/90")
    assert parent.results == [GetDOBResult(date_of_birth=date(1990, 3, 5),
                                           time_of_birth=time(7, 30))]


async def test_name_parts_are_required_and_placeholders_ignored(autojump_clock: object) -> None:
    a = start_actions()
    parent = Parent(lambda: GetNameTask(last_name=True, require_confirmation=False))
    a.add_llm("Your name?", input=NAME_ASK.format(name_format="{first_name} {last_name}"))
    a.add_llm("", tool_calls=call("update_name", "u1", first_name="Ada", last_name="null"),
              input="Ada")
    a.add_llm("Last name?", input="Incomplete name: last name is required but was not provided")
    a.add_llm("", tool_calls=call("update_name", "u2", first_name="Ada", last_name="Lovelace",
                                  middle_name="King"), input="Lovelace")
    await _drive(parent, a, "Ada", "Lovelace")
    assert parent.results == [GetNameResult(first_name="Ada", middle_name=None,
                                            last_name="Lovelace")]


def test_name_needs_a_part() -> None:
    with pytest.raises(ValueError):
        GetNameTask(first_name=False)


def test_luhn() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")


async def test_credit_card_restart_then_complete(autojump_clock: object) -> None:
    a = start_actions()
    number_ask = ("Get the user's credit card number. Look through the conversation first: if "
                  "they already gave it (before this step started), record it with "
                  "update_card_number instead of asking again. Ask only when the conversation "
                  "does not have it yet.")
    a.add_llm("Card number?", input=number_ask)
    # the first card: the user restarts during the number step, then gives another card
    a.add_llm("", tool_calls=call("restart_card_collection", "r1", reason="other card"),
              input="wait, another card")
    a.add_llm("", tool_calls=call("update_card_number", "n1", card_number="4111 1111 1111 1111"),
              input="4111111111111111")
    a.add_llm("", tool_calls=call("update_expiration_date", "e1", expiration_month=12,
                                  expiration_year=99), input="12/99")
    a.add_llm("", tool_calls=call("update_security_code", "s1", security_code="012"),
              input="012")
    a.add_llm("", tool_calls=call("update_name", "m1", first_name="Ada", last_name="Lovelace"),
              input="Ada Lovelace")
    parent = Parent(lambda: GetCreditCardTask(require_confirmation=False))
    await _drive(parent, a, "wait, another card", "4111111111111111", "12/99", "012",
                 "Ada Lovelace")
    assert parent.results == [GetCreditCardResult(
        cardholder_name="Ada Lovelace", issuer="Visa", card_number="4111111111111111",
        security_code="012", expiration_date="12/99")]


async def test_credit_card_decline_fails_the_task(autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("", tool_calls=call("decline_card_capture", "d1", reason="no card"),
              input="I won't")
    a.add_llm("ok", input="failed: couldn't get the card details: no card")
    parent = Parent(lambda: GetCreditCardTask(require_confirmation=False))
    await _drive(parent, a, "I won't")
    assert [str(r) for r in parent.results] == ["couldn't get the card details: no card"]
