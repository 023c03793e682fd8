"""RunResult across cascades: a three-turn TaskGroup (examples/clinic_receptionist.py).

The asyncio runtime's ``session.run()`` could return before a TaskGroup's bootstrap chain
settled, or miss the cascade of handoffs a tool's ``complete()`` sets off. Here each run
captures the whole cascade and returns while the next task waits for the user.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import trio

from agents_trio import AgentSession, TaskGroup, TaskGroupResult
from agents_trio.testing import FakeLLM

_spec = importlib.util.spec_from_file_location(
    "clinic_receptionist",
    pathlib.Path(__file__).parents[1] / "examples" / "clinic_receptionist.py")
clinic = importlib.util.module_from_spec(_spec)
sys.modules["clinic_receptionist"] = clinic
_spec.loader.exec_module(clinic)


def _message(expect, text: str) -> None:
    assert expect.next_event().is_message(role="assistant").event().item.text_content == text


async def test_three_turns_each_capture_their_full_cascade(autojump_clock):
    session = AgentSession(llm=FakeLLM(clinic.script().llm_responses))
    receptionist = clinic.Receptionist()
    async with session:
        await session.start(receptionist)
        with trio.fail_after(30):
            first = await session.run(user_input=clinic.TURNS[0])
        # the greeting belongs to the bootstrap chain, not to the run
        assert isinstance(session.current_agent, clinic.IdentifyPatient)
        e = first.expect
        e.next_event().is_function_call(name="record_intent", arguments={"intent": "book_visit"})
        e.next_event().is_function_call_output(output="")
        e.next_event().is_agent_handoff(new_agent_type=TaskGroup)
        e.next_event().is_agent_handoff(new_agent_type=clinic.IdentifyPatient)
        _message(e, "May I have your name and date of birth?")
        e.no_more_events()

        with trio.fail_after(30):
            second = await session.run(user_input=clinic.TURNS[1])
        assert isinstance(session.current_agent, clinic.ScheduleVisit)
        e = second.expect
        e.next_event().is_function_call(name="record_patient", arguments={"name": "Ada Lovelace"})
        e.next_event().is_function_call_output()
        e.next_event().is_agent_handoff(new_agent_type=TaskGroup)
        e.next_event().is_agent_handoff(new_agent_type=clinic.ScheduleVisit)
        _message(e, "Which day would suit you?")
        e.no_more_events()

        with trio.fail_after(30):
            third = await session.run(user_input=clinic.TURNS[2])
        assert session.current_agent is receptionist
        e = third.expect
        e.next_event().is_function_call(name="book", arguments={"day": "Tuesday"})
        e.next_event().is_function_call_output()
        e.next_event().is_agent_handoff(new_agent_type=TaskGroup)
        e.next_event().is_agent_handoff(new_agent_type=clinic.Receptionist)
        _message(e, "You're booked for Tuesday. Goodbye!")
        e.no_more_events()

    assert isinstance(receptionist.result, TaskGroupResult)
    assert receptionist.result.task_results == {
        "intent": "book_visit", "patient": "Ada Lovelace (1815-12-10)",
        "visit": "booked on Tuesday"}
    texts = [i.text_content for i in receptionist.chat_ctx.items
             if getattr(i, "role", None) in ("user", "assistant")]
    # the group's conversation was merged back into the receptionist
    assert texts[:2] == ["Hello, how can I help you today?", clinic.TURNS[0]]
    assert texts[-1] == "You're booked for Tuesday. Goodbye!"


async def test_run_right_after_start_waits_for_the_bootstrap_chain(autojump_clock):
    session = AgentSession(llm=FakeLLM(clinic.script().llm_responses))
    async with session:
        await session.start(clinic.Receptionist())
        # no sleep: run() must find VerifyIntent, not the receptionist
        with trio.fail_after(30):
            result = await session.run(user_input=clinic.TURNS[0])
        result.expect.next_event().is_function_call(name="record_intent")


async def test_out_of_scope_goes_back_to_an_earlier_task(autojump_clock):
    from agents_trio import FunctionToolCall

    actions = clinic.script()
    actions.add_llm("", [FunctionToolCall(name="out_of_scope", arguments='{"task_ids": '
                                          '["intent"]}', call_id="o1")],
                    input="actually I want to cancel")
    actions.add_llm("", [FunctionToolCall(name="record_intent",
                                          arguments='{"intent": "cancel_visit"}',
                                          call_id="c9")], input="cancel my visit")
    completed: list[str] = []
    session = AgentSession(llm=FakeLLM(actions.llm_responses))

    class Receptionist(clinic.Receptionist):
        async def on_enter(self) -> None:
            group = TaskGroup(summarize_chat_ctx=False,
                              on_task_completed=lambda ev: completed.append(ev.task_id))
            group.add(clinic.VerifyIntent, id="intent", description="why the caller is calling")
            group.add(clinic.IdentifyPatient, id="patient", description="who the patient is")
            self.result = await group

    receptionist = Receptionist()
    async with session:
        await session.start(receptionist)
        with trio.fail_after(30):
            await session.run(user_input=clinic.TURNS[0])
            assert isinstance(session.current_agent, clinic.IdentifyPatient)
            tools = [t.name for t in session.current_agent.tools]
            assert "out_of_scope" in tools
            back = await session.run(user_input="actually I want to cancel")
            back.expect.contains_function_call(name="out_of_scope")
            assert isinstance(session.current_agent, clinic.VerifyIntent)
            await session.run(user_input="cancel my visit")
            assert isinstance(session.current_agent, clinic.IdentifyPatient)
            await session.run(user_input=clinic.TURNS[1])
    assert completed == ["intent", "intent", "patient"]
    assert receptionist.result.task_results["intent"] == "cancel_visit"


async def test_group_summary_and_return_exceptions(autojump_clock):
    from agents_trio import AgentTask, ToolError
    from agents_trio.testing import FakeActions

    class Failing(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__(instructions="fails")

        async def on_enter(self) -> None:
            self.complete(ToolError("could not get it"))

    class Quick(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__(instructions="quick")

        async def on_enter(self) -> None:
            self.session.say("quick question")
            self.complete("fine")

    a = FakeActions()
    a.add_llm("The user answered a quick question.",
              input="Conversation to summarize:\n\n<assistant>\nquick question\n</assistant>")
    results = {}

    class Host(clinic.Receptionist):
        async def on_enter(self) -> None:
            group = TaskGroup(return_exceptions=True)
            group.add(Failing, id="failing", description="fails")
            group.add(Quick, id="quick", description="quick")
            results["group"] = await group
            results["ctx"] = [i.text_content for i in group.chat_ctx.items
                              if i.type == "message" and i.role != "system"]

    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Host())
        with trio.fail_after(10):
            while "group" not in results:
                await trio.sleep(0.1)
    task_results = results["group"].task_results
    assert isinstance(task_results["failing"], ToolError)
    assert task_results["quick"] == "fine"
    assert results["ctx"] == [
        "<chat_history_summary>\nThe user answered a quick question.\n</chat_history_summary>"]
