"""GetEmailTask driven by a scripted LLM: update, confirm, decline, stale confirmation."""

from __future__ import annotations

import trio
from prebuilt_helpers import Parent, call, start_actions

from agents_trio import AgentSession
from agents_trio.beta.workflows import GetEmailResult, GetEmailTask
from agents_trio.testing import FakeLLM

ASK = ("Ask the user for their email address. If they already gave one earlier in the "
       "conversation, record it with update_email_address instead of asking again.")
UPDATED = ("The email address is now ada@example.com\nRead the address back to the user.\n"
           "Ask the user to confirm it; do not call `confirm_email_address` yourself")


async def test_update_then_confirm_completes_with_the_address(autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("What is your email?", input=ASK)
    a.add_llm("", tool_calls=call("update_email_address", "u1", email=" ada@example.com "),
              input="ada at example dot com")
    a.add_llm("That is ada@example.com, right?", input=UPDATED)
    a.add_llm("", tool_calls=call("confirm_email_address", "c1"), input="yes")
    llm = FakeLLM(a.llm_responses)
    parent = Parent(lambda: GetEmailTask(require_confirmation=True))
    async with AgentSession(llm=llm) as session:
        await session.start(parent)
        with trio.fail_after(30):
            await session.run(user_input="go")
            assert isinstance(session.current_agent, GetEmailTask)
            tools = {t.name for t in session.current_agent.tools}
            assert tools == {"update_email_address", "decline_email_capture"}
            run = await session.run(user_input="ada at example dot com")
            run.expect.next_event().is_function_call(name="update_email_address")
            run.expect.next_event().is_function_call_output(output=UPDATED)
            assert "confirm_email_address" in {t.name for t in session.current_agent.tools}
            await session.run(user_input="yes")
        assert parent.results == [GetEmailResult(email_address="ada@example.com")]
        assert session.current_agent is parent


async def test_without_confirmation_the_update_completes(autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("", tool_calls=call("update_email_address", "u1", email="bo@example.org"),
              input=ASK)  # the model records an address it already has
    parent = Parent(lambda: GetEmailTask(require_confirmation=False))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(parent)
        with trio.fail_after(30):
            await session.run(user_input="go")
    assert parent.results == [GetEmailResult(email_address="bo@example.org")]


async def test_an_invalid_address_is_a_tool_error_and_decline_fails_the_task(
        autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("Your email?", input=ASK)
    a.add_llm("", tool_calls=call("update_email_address", "u1", email="not-an-email"),
              input="not an email")
    a.add_llm("", tool_calls=call("decline_email_capture", "d1", reason="privacy"),
              input="Invalid email address provided: not-an-email")
    a.add_llm("ok", input="failed: couldn't get the email address: privacy")
    parent = Parent(lambda: GetEmailTask(require_confirmation=False))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(parent)
        with trio.fail_after(30):
            await session.run(user_input="go")
            await session.run(user_input="not an email")
    assert [str(r) for r in parent.results] == ["couldn't get the email address: privacy"]


async def test_a_stale_confirmation_does_not_complete(autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("Your email?", input=ASK)
    a.add_llm("", tool_calls=call("update_email_address", "u1", email="ada@example.com"),
              input="ada")
    a.add_llm("Right?", input=UPDATED)
    # confirms and corrects in one step: the confirm tool of the old address is stale
    a.add_llm("", tool_calls=[*call("update_email_address", "u2", email="ada@example.net"),
                              *call("confirm_email_address", "c1")], input="no, dot net")
    parent = Parent(lambda: GetEmailTask(require_confirmation=True))
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(parent)
        with trio.fail_after(30):
            await session.run(user_input="go")
            await session.run(user_input="ada")
            run = await session.run(user_input="no, dot net")
        outputs = [e.item.output for e in run.events if e.type == "function_call_output"]
        assert any("changed after the confirmation" in o for o in outputs)
        assert parent.results == []
        assert isinstance(session.current_agent, GetEmailTask)


def test_the_instructions_follow_the_options() -> None:
    plain = GetEmailTask()
    assert "confirm_email_address" in plain.instructions  # voice: confirmation by default
    spelled = GetEmailTask(verify_spelling=True, extra_instructions="Be brief.")
    assert "one character at a time" in spelled.instructions
    assert spelled.instructions.rstrip().endswith("Be brief.")
    assert GetEmailTask(instructions="custom").instructions == "custom"
    assert "confirm_email_address" not in GetEmailTask(require_confirmation=False).instructions


async def test_a_spoken_conversation_asks_for_a_confirmation_by_default(
        autojump_clock: object) -> None:
    from agents_trio.testing import FakeTTS
    a = start_actions()
    a.add_llm("", tool_calls=call("update_email_address", "u1", email="ada@example.com"),
              input=ASK)
    parent = Parent(lambda: GetEmailTask(tts=FakeTTS()))  # the task speaks: voice rules
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(parent)
        with trio.fail_after(30):
            await session.run(user_input="go")
        assert parent.results == []  # waiting for the confirmation
        task = session.current_agent
        assert "confirm_email_address" in {t.name for t in task.tools}
        assert "speech transcription" in task.instructions  # the voice instructions


def test_require_explicit_ask_hides_the_update_tool_while_greeting() -> None:
    from agents_trio import ToolFlag
    flags = {t.name: t.flags for t in GetEmailTask(require_explicit_ask=True).tools}
    assert flags["update_email_address"] & ToolFlag.IGNORE_ON_ENTER
    assert flags["decline_email_capture"] & ToolFlag.IGNORE_ON_ENTER
    plain = {t.name: t.flags for t in GetEmailTask().tools}
    assert not plain["update_email_address"] & ToolFlag.IGNORE_ON_ENTER


async def test_a_typed_conversation_uses_the_text_instructions(autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("Your email?", input=ASK)
    parent = Parent(lambda: GetEmailTask())
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(parent)
        with trio.fail_after(30):
            await session.run(user_input="go")
        assert "The user types the address" in session.current_agent.instructions
