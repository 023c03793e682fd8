"""GetEmailTask driven by a scripted LLM: update, confirm, decline, stale confirmation."""

from __future__ import annotations

from agents_trio.instructions import render_instructions

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


def _voice(task: GetEmailTask) -> str:
    return render_instructions(task.instructions, "audio")


def test_the_instructions_follow_the_options() -> None:
    plain = GetEmailTask()
    assert "confirm_email_address" in _voice(plain)  # voice: confirmation by default
    # typed: no confirmation by default, as in LiveKit
    assert "confirm_email_address" not in render_instructions(plain.instructions, "text")
    spelled = GetEmailTask(verify_spelling=True, extra_instructions="Be brief.")
    assert "one character at a time" in _voice(spelled)
    assert _voice(spelled).rstrip().endswith("Be brief.")
    assert GetEmailTask(instructions="custom").instructions == "custom"
    assert "confirm_email_address" not in _voice(GetEmailTask(require_confirmation=False))


async def test_a_spoken_conversation_asks_for_a_confirmation_by_default(
        autojump_clock: object) -> None:
    from agents_trio.testing import FakeTTS
    a = start_actions()
    a.add_llm("Your email?", input=ASK)
    a.add_llm("", tool_calls=call("update_email_address", "u1", email="ada@example.com"),
              input="ada at example dot com")
    parent = Parent(lambda: GetEmailTask(tts=FakeTTS()))
    llm = FakeLLM(a.llm_responses)
    async with AgentSession(llm=llm) as session:
        await session.start(parent)
        with trio.fail_after(30):
            await session.run(user_input="go")
            # the user says the address (a spoken turn, as the STT would deliver it)
            await session.run(user_input="ada at example dot com", input_modality="audio")
        assert parent.results == []  # waiting for the confirmation
        task = session.current_agent
        assert "confirm_email_address" in {t.name for t in task.tools}
        # the spoken turn's request had the voice instructions
        system = [i.text_content for i in llm.calls[-1]["chat_ctx"].items
                  if getattr(i, "role", None) == "system"]
        assert any("speech transcription" in s for s in system)


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
    llm = FakeLLM(a.llm_responses)
    async with AgentSession(llm=llm) as session:
        await session.start(parent)
        with trio.fail_after(30):
            await session.run(user_input="go")
        # the task's question answers a typed turn: its request had the text instructions
        system = [i.text_content for i in llm.calls[-1]["chat_ctx"].items
                  if getattr(i, "role", None) == "system"]
        assert any("The user types the address" in s for s in system)
        assert not any("speech transcription" in s for s in system)
