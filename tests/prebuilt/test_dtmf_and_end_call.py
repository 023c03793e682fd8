"""GetDtmfTask fed by the job room's keypad events, and EndCallTool closing the session after
the goodbye, on virtual time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio
from prebuilt_helpers import Parent, call, start_actions

import agents_trio
from agents_trio import Agent, AgentSession, CloseReason
from agents_trio.beta import EndCallTool
from agents_trio.beta.workflows import GetDtmfResult, GetDtmfTask
from agents_trio.testing import FakeActions, FakeLLM, open_fake_room


async def _in_job(parent: Parent, a: FakeActions, keys: str, *,
                  pause_before_last: float = 0.0) -> None:
    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
            await session.start(parent)
            with trio.fail_after(60):
                await session.run(user_input="go")
                assert isinstance(session.current_agent, GetDtmfTask)
                for i, key in enumerate(keys):
                    if i == len(keys) - 1:
                        await trio.sleep(pause_before_last)
                    ctx.room.emit("sip_dtmf_received", SimpleNamespace(digit=key))
                    await trio.sleep(0.5)
                while not parent.results:
                    await trio.sleep(0.1)

    await agents_trio.run_job(entrypoint, url="wss://fake", token="t",
                              open_room_fn=open_fake_room)


async def test_the_stop_key_completes_with_the_digits(autojump_clock: object) -> None:
    parent = Parent(lambda: GetDtmfTask(num_digits=4))
    await _in_job(parent, start_actions(), "1234#")
    assert parent.results == [GetDtmfResult(user_input="1 2 3 4")]


async def test_a_pause_ends_the_input_and_too_few_digits_fail(autojump_clock: object) -> None:
    a = start_actions()
    a.add_llm("sorry", input="failed: Digits input not fully received. Expect 4 digits, got 3")
    parent = Parent(lambda: GetDtmfTask(num_digits=4, dtmf_input_timeout=2.0))
    # the fourth key comes after the 2 s timeout: the input ended with three
    await _in_job(parent, a, "1239", pause_before_last=5.0)
    assert [str(r) for r in parent.results] == [
        "Digits input not fully received. Expect 4 digits, got 3"]


async def test_with_confirmation_the_model_confirms_the_digits(autojump_clock: object) -> None:
    a = start_actions()
    prompt = ("The user typed these digits on the phone keypad:\n<dtmf_inputs>4 2</dtmf_inputs>"
              "\nRead them back one at a time with pauses between them (e.g. 'four, two, "
              "seven') and ask whether they are right. Once the user agrees, call "
              "`confirm_inputs` with them.")
    a.add_llm("", tool_calls=call("confirm_inputs", "c1", inputs=["4", "2"]), input=prompt)
    parent = Parent(lambda: GetDtmfTask(num_digits=2, ask_for_confirmation=True))
    await _in_job(parent, a, "42#")
    assert parent.results == [GetDtmfResult(user_input="4 2")]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        GetDtmfTask(num_digits=0)


class Hangs(Agent):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(instructions="Help, then hang up.", tools=[EndCallTool(**kwargs)])


async def test_end_call_shuts_down_after_the_goodbye(autojump_clock: object) -> None:
    a = FakeActions()
    a.add_llm("", tool_calls=call("end_call", "e1"), input="bye")
    a.add_llm("Goodbye!", input="say goodbye to the user")
    closed: list[CloseReason] = []
    session = AgentSession(llm=FakeLLM(a.llm_responses))
    session.on("close", lambda ev: closed.append(ev.reason))
    async with session:
        await session.start(Hangs())
        with trio.fail_after(30):
            run = await session.run(user_input="bye")
            run.expect.next_event().is_function_call(name="end_call")
            run.expect.next_event().is_function_call_output(output="say goodbye to the user")
            run.expect.next_event().is_message(role="assistant")
            while not closed:
                await trio.sleep(0.1)
    assert closed == [CloseReason.USER_INITIATED]
    assert [m.text_content for m in session.history.items
            if getattr(m, "role", None) == "assistant"] == ["Goodbye!"]


async def test_end_call_without_instructions_and_the_callbacks(autojump_clock: object) -> None:
    a = FakeActions()
    a.add_llm("", tool_calls=call("end_call", "e1"), input="bye")
    seen: list[str] = []

    async def called(ev: EndCallTool.ToolCalledEvent) -> None:
        seen.append("called")

    async def completed(ev: EndCallTool.ToolCompletedEvent) -> None:
        seen.append(f"completed {ev.output}")

    closed: list[CloseReason] = []
    session = AgentSession(llm=FakeLLM(a.llm_responses))
    session.on("close", lambda ev: closed.append(ev.reason))
    async with session:
        await session.start(Hangs(end_instructions=None, on_tool_called=called,
                                  on_tool_completed=completed))
        with trio.fail_after(30):
            await session.run(user_input="bye")
            while not closed:
                await trio.sleep(0.1)
    assert seen == ["called", "completed None"]
    assert closed == [CloseReason.USER_INITIATED]


async def test_end_call_in_a_job_shuts_the_job_down(autojump_clock: object) -> None:
    a = FakeActions()
    a.add_llm("", tool_calls=call("end_call", "e1"), input="bye")
    contexts: list[agents_trio.JobContext] = []

    async def entrypoint(ctx: agents_trio.JobContext) -> None:
        async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
            await session.start(Hangs(end_instructions=None))
            await session.run(user_input="bye")
            await trio.sleep_forever()  # the job's shutdown ends this

    with trio.fail_after(60):
        await agents_trio.run_job(entrypoint, url="wss://fake", token="t",
                                  open_room_fn=open_fake_room, shutdown_grace=1.0,
                                  on_ready=contexts.append)
    assert [c.shutdown_reason for c in contexts] == [CloseReason.USER_INITIATED]
