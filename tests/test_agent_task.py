"""AgentTask: awaited from a tool, the parent pauses and resumes (reference 1.5 and 7.5)."""

from __future__ import annotations

import trio

import pytest

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext,
                         ToolError, function_tool)
from agents_trio.testing import FakeActions, FakeLLM


class AskValue(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask the user for a value.")
        self.log: list[str] = []

    async def on_enter(self) -> None:
        self.log.append("enter")
        self.session.generate_reply(instructions="ask for a value")

    async def on_exit(self) -> None:
        self.log.append("exit")

    @function_tool
    async def finish(self, ctx: RunContext, value: str) -> None:
        """Record the value.

        Args:
            value: The value the user gave
        """
        self.complete(value)


class Parent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the parent.")
        self.task: AskValue | None = None

    @function_tool
    async def ask(self, ctx: RunContext) -> str:
        """Ask the user for a value."""
        self.task = AskValue()
        value = await self.task
        return f"got {value}"


def _actions() -> FakeActions:
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="ask", arguments="{}", call_id="a1")],
              input="go")
    a.add_llm("what value?", input="ask for a value")
    a.add_llm("", tool_calls=[FunctionToolCall(name="finish", arguments='{"value": "42"}',
                                               call_id="f1")], input="42")
    a.add_llm("thanks, got it", input="got 42")
    return a


async def test_task_awaited_from_a_tool_pauses_and_resumes_the_parent(autojump_clock):
    actions = _actions()
    session = AgentSession(llm=FakeLLM(actions.llm_responses))
    parent = Parent()
    async with session:
        await session.start(parent)
        with trio.fail_after(10):
            run1 = await session.run(user_input="go")
        run1.expect.next_event().is_function_call(name="ask")
        run1.expect.next_event().is_agent_handoff(new_agent_type=AskValue)
        assert run1.expect.next_event().is_message(role="assistant").event().item.text_content \
            == "what value?"
        run1.expect.no_more_events()
        assert isinstance(session.current_agent, AskValue)
        assert parent.task is not None and parent.task.log == ["enter"]

        with trio.fail_after(10):
            run2 = await session.run(user_input="42")
        run2.expect.next_event().is_function_call(name="finish")
        run2.expect.next_event().is_function_call_output(output="")
        run2.expect.next_event().is_agent_handoff(new_agent_type=Parent)
        run2.expect.next_event().is_function_call_output(output="got 42")
        assert run2.expect.next_event().is_message(role="assistant").event().item.text_content \
            == "thanks, got it"
        run2.expect.no_more_events()
        assert run2.final_output == "42"
        assert session.current_agent is parent
        assert parent.task.log == ["enter", "exit"]

    kinds = [(i.type, getattr(i, "role", None) or getattr(i, "name", None))
             for i in parent.chat_ctx.items]
    # the task's messages are merged, its own tool calls are not
    assert kinds == [("message", "system"), ("agent_config_update", None),
                     ("message", "user"), ("function_call", "ask"),
                     ("agent_config_update", None), ("message", "assistant"),
                     ("message", "user"), ("agent_config_update", None),
                     ("function_call_output", "ask"), ("message", "assistant")]
    handoffs = [(h.old_agent_id, h.new_agent_id) for h in session.history.items
                if h.type == "agent_handoff"]
    assert handoffs == [(None, "parent"), ("parent", "ask_value"), ("ask_value", "parent")]


async def test_awaiting_a_task_outside_a_tool_is_an_error(autojump_clock):
    with pytest.raises(RuntimeError, match="inside a function tool"):
        await AskValue()


async def test_complete_twice_is_an_error() -> None:
    task = AskValue()
    task.complete("a")
    with pytest.raises(RuntimeError, match="already completed"):
        task.complete("b")


class RaisingTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="fails")

    async def on_enter(self) -> None:
        self.complete(ToolError("no luck"))


class AskTwice(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="parent")
        self.errors: list[str] = []

    @function_tool
    async def ask(self, ctx: RunContext) -> str:
        """Ask."""
        task = RaisingTask()
        try:
            await task
        except ToolError as e:
            self.errors.append(e.message)
        try:
            await task
        except RuntimeError as e:
            self.errors.append(str(e))
        return "done"


async def test_exception_passed_to_complete_is_raised_and_double_await_refused(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="ask", arguments="{}", call_id="a1")],
              input="go")
    session = AgentSession(llm=FakeLLM(a.llm_responses))
    agent = AskTwice()
    async with session:
        await session.start(agent)
        with trio.fail_after(10):
            await session.run(user_input="go")
    assert agent.errors == ["no luck", "AgentTask raising_task was already awaited"]


class Dialog(AgentTask[str]):
    def __init__(self, label: str, log: list[str]) -> None:
        super().__init__(instructions=f"dialog {label}")
        self.name = label
        self.log = log

    async def on_enter(self) -> None:
        self.log.append(f"{self.name}.enter")
        await trio.sleep(0.5)
        self.complete(f"answer {self.name}")

    async def on_exit(self) -> None:
        self.log.append(f"{self.name}.exit")


class TwoQuestions(Agent):
    def __init__(self, log: list[str]) -> None:
        super().__init__(instructions="asks twice")
        self.log = log

    @function_tool
    async def ask(self, ctx: RunContext, label: str) -> str:
        """Ask one question.

        Args:
            label: Which question
        """
        return await Dialog(label, self.log)


async def test_tasks_awaited_by_parallel_tool_calls_run_one_after_another(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[
        FunctionToolCall(name="ask", arguments='{"label": "a"}', call_id="1"),
        FunctionToolCall(name="ask", arguments='{"label": "b"}', call_id="2")], input="go")
    log: list[str] = []
    session = AgentSession(llm=FakeLLM(a.llm_responses))
    executed = []
    session.on("function_tools_executed", executed.append)
    async with session:
        await session.start(TwoQuestions(log))
        with trio.fail_after(10):
            await session.run(user_input="go")
    assert log in (["a.enter", "a.exit", "b.enter", "b.exit"],
                   ["b.enter", "b.exit", "a.enter", "a.exit"])
    (ev,) = executed
    assert sorted(o.output for o in ev.function_call_outputs) == ["answer a", "answer b"]


class ExitSurvey(Agent):
    def __init__(self, log: list[str]) -> None:
        super().__init__(instructions="survey on exit")
        self.log = log

    async def on_exit(self) -> None:
        self.log.append(await Dialog("survey", self.log))


async def test_a_task_awaited_from_on_exit_runs_before_the_handoff_completes(autojump_clock):
    log: list[str] = []
    async with AgentSession(llm=FakeLLM()) as session:
        await session.start(ExitSurvey(log))
        session.update_agent(Agent(instructions="next"))
        with trio.fail_after(10):
            while session._activity is None or session._activity.agent.instructions != "next":
                await trio.sleep(0.1)
    assert log == ["survey.enter", "survey.exit", "answer survey"]
