"""Issue "Race-free under attack", items 2 and 7: AgentTasks at any depth, TaskGroup callbacks.

2. A tool awaits an AgentTask whose ``on_enter`` reply calls a tool that awaits a second
   AgentTask which needs another user turn: ``session.run()`` must return when the
   conversation waits for the user, whatever the depth, and the next ``run()`` continues the
   innermost task. The same holds when a tool of an ``on_enter`` reply made before the first
   ``run()`` awaits an AgentTask that needs user input.
7. ``TaskGroup(on_task_completed=...)`` awaits an async callback (LiveKit's is async).
"""

from __future__ import annotations

import trio

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext,
                         TaskGroup, function_tool)
from agents_trio.session import SessionState
from agents_trio.testing import FakeActions, FakeLLM, create_session


def _call(name: str, call_id: str, arguments: str = "{}") -> list[FunctionToolCall]:
    return [FunctionToolCall(name=name, arguments=arguments, call_id=call_id)]


class InnerTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="inner")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="inner asks")

    @function_tool
    async def give(self, ctx: RunContext, value: str) -> None:
        """Give the inner value.

        Args:
            value: The value
        """
        self.complete(value)


class OuterTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="outer")

    async def on_enter(self) -> None:
        # this reply calls `deeper`, which awaits the inner task
        self.session.generate_reply(instructions="outer enters")

    @function_tool
    async def deeper(self, ctx: RunContext) -> None:
        """Go deeper."""
        value = await InnerTask()
        self.complete(f"outer got {value}")


class Root(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="root")
        self.results: list[str] = []

    @function_tool
    async def start_outer(self, ctx: RunContext) -> str:
        """Start the outer task."""
        value = await OuterTask()
        self.results.append(value)
        return value


def _nested_actions() -> FakeActions:
    a = FakeActions()
    # the root's reply speaks while its tool starts the outer task
    a.add_llm("Sure.", tool_calls=_call("start_outer", "c_outer"), input="go")
    a.add_llm("", tool_calls=_call("deeper", "c_deeper"), input="outer enters")
    a.add_llm("what is the inner value?", input="inner asks")
    a.add_llm("", tool_calls=_call("give", "c_give", '{"value": "7"}'), input="7")
    a.add_llm("all done with outer got 7", input="outer got 7")
    for text in ("Sure.", "what is the inner value?", "all done with outer got 7"):
        a.add_tts(1.0, input=text)
    return a


async def test_run_returns_when_a_nested_task_waits_for_the_user(autojump_clock):
    root = Root()
    async with create_session(_nested_actions()) as session:
        await session.start(root)
        session.input.audio.push(0.1)
        with trio.fail_after(30):
            run1 = await session.run(user_input="go")
        said = [e.item.text_content for e in run1.events
                if e.type == "message" and e.item.role == "assistant"]
        assert said == ["Sure.", "what is the inner value?"], run1.events
        assert isinstance(session.current_agent, InnerTask)

        with trio.fail_after(30):
            run2 = await session.run(user_input="7")
        run2.expect.contains_function_call(name="give")
        said = [e.item.text_content for e in run2.events
                if e.type == "message" and e.item.role == "assistant"]
        assert said == ["all done with outer got 7"], run2.events
        assert session.current_agent is root
        assert root.results == ["outer got 7"]


class AsksAtOnce(Agent):
    """on_enter asks for a reply whose tool awaits a task that needs the user."""

    def __init__(self) -> None:
        super().__init__(instructions="root")
        self.results: list[str] = []

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet and ask")

    @function_tool
    async def ask_inner(self, ctx: RunContext) -> str:
        """Ask the inner question."""
        value = await InnerTask()
        self.results.append(value)
        return f"inner said {value}"


async def test_run_continues_a_task_started_by_an_on_enter_reply_before_the_first_run(
        autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=_call("ask_inner", "c_ask"), input="greet and ask")
    a.add_llm("what is the inner value?", input="inner asks")
    a.add_llm("", tool_calls=_call("give", "c_give", '{"value": "9"}'), input="9")
    a.add_llm("thanks for 9", input="inner said 9")
    root = AsksAtOnce()
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(root)
        with trio.fail_after(30):
            run = await session.run(user_input="9")
        run.expect.contains_function_call(name="give")
        said = [e.item.text_content for e in run.events
                if e.type == "message" and e.item.role == "assistant"]
        assert said == ["thanks for 9"], run.events
        assert root.results == ["9"]
        assert session.current_agent is root


class Step(AgentTask[str]):
    def __init__(self, name: str) -> None:
        super().__init__(instructions=name)
        self.name = name

    async def on_enter(self) -> None:
        self.complete(f"{self.name} ok")


async def test_task_group_awaits_an_async_on_task_completed(autojump_clock):
    journal: list[str] = []

    async def on_completed(ev) -> None:
        journal.append(f"completed {ev.task_id} at {trio.current_time():.1f}")
        await trio.sleep(1.0)
        journal.append(f"after {ev.task_id}")

    class Host(Agent):
        def __init__(self) -> None:
            super().__init__(instructions="host")
            self.result = None

        async def on_enter(self) -> None:
            group = TaskGroup(summarize_chat_ctx=False, on_task_completed=on_completed)
            group.add(lambda: Step("a"), id="a", description="step a")
            group.add(lambda: Step("b"), id="b", description="step b")
            self.result = await group
            journal.append("group done")

    host = Host()
    async with AgentSession(llm=FakeLLM()) as session:
        t0 = trio.current_time()
        await session.start(host)
        with trio.fail_after(30):
            while "group done" not in journal:
                await trio.sleep(0.1)
    assert journal == [f"completed a at {t0:.1f}", "after a", f"completed b at {t0 + 1:.1f}",
                       "after b", "group done"], journal
    assert host.result.task_results == {"a": "a ok", "b": "b ok"}


class Other(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="other", id="other")


class Journaled(Root):
    def __init__(self) -> None:
        super().__init__()
        self.journal: list[str] = []

    async def on_exit(self) -> None:
        self.journal.append("root.on_exit")

    @function_tool
    async def ask_inner(self, ctx: RunContext) -> str:
        """Ask the inner question."""
        try:
            return await InnerTask()
        except BaseException as e:
            self.journal.append(f"ask_inner: {type(e).__name__}: {e}")
            raise


async def test_update_agent_while_a_task_runs_hands_over_without_a_hang(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=_call("ask_inner", "c_ask"), input="go")
    a.add_llm("what is the inner value?", input="inner asks")
    root = Journaled()
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(root)
        with trio.fail_after(30):
            await session.run(user_input="go")
        assert isinstance(session.current_agent, InnerTask)
        other = Other()
        session.update_agent(other)
        with trio.fail_after(30):
            while "root.on_exit" not in root.journal:
                await trio.sleep(0.1)
        assert session.current_agent is other
        assert root.journal[0] == ("ask_inner: ToolError: AgentTask inner_task ended: another "
                                   "agent took over"), root.journal
        # the replaced agent is closed, not resumed: the new agent keeps the floor
        await trio.sleep(1.0)
        assert session.current_agent is other
    items = session.history.items
    calls = [i.call_id for i in items if i.type == "function_call"]
    outputs = [i.call_id for i in items if i.type == "function_call_output"]
    assert calls == ["c_ask"] and outputs == ["c_ask"], items


class HangingTask(AgentTask[str]):
    """Its reply calls two tools at once: one completes the task, the other never returns."""

    def __init__(self) -> None:
        super().__init__(instructions="hanging")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="hang and finish")

    @function_tool
    async def hang(self, ctx: RunContext) -> None:
        """Hang."""
        await trio.sleep_forever()

    @function_tool
    async def finish_now(self, ctx: RunContext) -> None:
        """Finish."""
        self.complete("finished")


class AwaitsHanging(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="root")

    @function_tool
    async def start(self, ctx: RunContext) -> str:
        """Start."""
        return await HangingTask()


async def test_close_while_a_completed_task_waits_for_its_hanging_tool(autojump_clock):
    """Found by the adversarial model: the task completed, its activity's drain waited for
    the hanging tool, the close could not stop that wait, and the parent's tool was left
    with no output (it ended in a group of cancellations)."""
    a = FakeActions()
    a.add_llm("", tool_calls=_call("start", "c_start"), input="go")
    a.add_llm("", tool_calls=[*_call("hang", "c_hang"), *_call("finish_now", "c_done")],
              input="hang and finish")
    session = AgentSession(llm=FakeLLM(a.llm_responses), close_grace=5.0)
    with trio.fail_after(60):
        async with session:
            await session.start(AwaitsHanging())
            session.generate_reply(user_input="go")
            await trio.sleep(2.0)
            started = trio.current_time()
            await session.aclose()
            took = trio.current_time() - started
    assert took < 5.0  # the unwinding does not wait for the hanging tool
    items = session.history.items
    calls = sorted(i.call_id for i in items if i.type == "function_call")
    outputs = sorted(i.call_id for i in items if i.type == "function_call_output")
    assert calls == outputs == ["c_done", "c_hang", "c_start"], items
    by_id = {i.call_id: i for i in items if i.type == "function_call_output"}
    assert by_id["c_start"].output == "finished", items
    assert by_id["c_hang"].is_error and "cancelled" in by_id["c_hang"].output


async def test_a_drained_shutdown_while_a_task_runs_tells_the_awaiter_it_was_cancelled(
        autojump_clock):
    # LiveKit's close cancels the task chain (ToolError "AgentTask … is cancelled"); no other
    # agent took over, so the awaiter must not hear that one did
    a = FakeActions()
    a.add_llm("", tool_calls=_call("ask_inner", "c_ask"), input="go")
    a.add_llm("what is the inner value?", input="inner asks")
    root = Journaled()
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(root)
        with trio.fail_after(30):
            await session.run(user_input="go")
        assert isinstance(session.current_agent, InnerTask)
        session.shutdown(drain=True)
        with trio.fail_after(30):
            while session.state is not SessionState.CLOSED:
                await trio.sleep(0.1)
    assert root.journal[0] == "ask_inner: ToolError: AgentTask inner_task is cancelled", \
        root.journal
    outputs = [i.call_id for i in session.history.items if i.type == "function_call_output"]
    assert outputs == ["c_ask"], session.history.items


class CommittingTask(AgentTask[str]):
    """Its reply calls a tool shielded from cancellation for 3 s (a payment commit)."""

    def __init__(self, said: list[str]) -> None:
        super().__init__(instructions="committing", id="committing")
        self.said = said

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="commit it")

    async def on_exit(self) -> None:
        self.said.append("committing.exit")
        self.session.say("the task says goodbye")

    @function_tool
    async def commit(self, ctx: RunContext) -> str:
        """Commit."""
        with trio.CancelScope(shield=True):
            await trio.sleep(3.0)
        return "committed"


class PoliteRoot(Agent):
    def __init__(self, said: list[str]) -> None:
        super().__init__(instructions="root", id="root")
        self.said = said

    @function_tool
    async def start(self, ctx: RunContext) -> str:
        """Start."""
        return await CommittingTask(self.said)

    async def on_exit(self) -> None:
        self.said.append("root.exit")
        try:
            self.session.say("the root says goodbye")
        except RuntimeError as e:
            self.said.append(f"root's goodbye refused: {e}")


async def test_a_task_held_past_the_close_grace_by_shielded_work_leaves_its_awaiter_a_goodbye(
        autojump_clock):
    """Fuzz find (TaskGroup goodbyes): at the close, a task's tool was shielded from
    cancellation for longer than the grace. The unwinding gave up on the task after its
    grace and cancelled the rest, so the agent under the task ran its ``on_exit`` only once
    the shield ended, after ``close``, where ``say`` raised. The close cannot end before
    shielded work anyway: the unwinding waits for the task, then the agent under it says its
    goodbye; the overrun is reported."""
    a = FakeActions()
    a.add_llm("", tool_calls=_call("start", "c_start"), input="go")
    a.add_llm("", tool_calls=_call("commit", "c_commit"), input="commit it")
    said: list[str] = []
    closes = []
    session = AgentSession(llm=FakeLLM(a.llm_responses), close_grace=0.5)
    with trio.fail_after(60):
        async with session:
            session.on("close", closes.append)
            await session.start(PoliteRoot(said))
            session.generate_reply(user_input="go")
            await trio.sleep(1.0)
            started = trio.current_time()
            await session.aclose()
            took = trio.current_time() - started
    assert said == ["committing.exit", "root.exit"], said
    assert 2.0 <= took <= 3.5, took  # the shield's rest, then the goodbyes
    messages = [i.text_content for i in session.history.items
                if i.type == "message" and i.role == "assistant"]
    assert "the task says goodbye" in messages and "the root says goodbye" in messages, messages
    (close,) = closes
    assert close.overrun is not None and "commit" in close.overrun.tools, close.overrun
