"""Issue "Race-free under attack", items 4, 5, 13 and 22: what a close keeps and reports.

4. A close in the middle of a step keeps the tool results that exist (committed, and reported
   by ``function_tools_executed``); a tool still running at close is answered by an error
   output saying so. After close every function call in the history has exactly one output.
5. Close while ``on_enter`` awaits an AgentTask: the awaiting code gets the same ToolError a
   tool gets, not a bare cancellation.
13. A tool that shields itself from cancellation holds up the close (Trio cannot break a
   shield): the overrun is made visible (a warning naming the tool once the grace has passed,
   and the overrun on the close event).
22. A reply cut short by close is saved with ``interrupted=True``.
"""

from __future__ import annotations

import logging
from collections import Counter

import trio

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext, ToolError,
                         function_tool)
from agents_trio.testing import FakeActions, FakeLLM, create_session


class Worker(Agent):
    def __init__(self, tool_seconds: float = 0.0) -> None:
        super().__init__(instructions="You work.")
        self.tool_seconds = tool_seconds
        self.journal: list[str] = []

    @function_tool
    async def work(self, ctx: RunContext, job: str) -> str:
        """Do a job.

        Args:
            job: The job
        """
        self.journal.append(f"start {job}")
        await trio.sleep(self.tool_seconds)
        self.journal.append(f"done {job}")
        return f"did {job}"


def _work_actions(job: str = "j1", *, audio: float = 6.0) -> FakeActions:
    a = FakeActions()
    call = FunctionToolCall(name="work", arguments=f'{{"job": "{job}"}}', call_id=f"call_{job}")
    a.add_llm("Working on it, this takes a while.", tool_calls=[call], input=f"do {job}")
    a.add_tts(audio)
    a.add_llm("Done.", input=f"did {job}")
    a.add_tts(1.0)
    return a


async def _close_during(agent: Agent, actions: FakeActions, close_after: float):
    session = create_session(actions)
    executed, closes, added = [], [], []
    session.on("function_tools_executed", executed.append)
    session.on("close", closes.append)
    session.on("conversation_item_added", added.append)
    with trio.fail_after(30):
        async with session:
            await session.start(agent)
            session.input.audio.push(0.1)
            session.generate_reply(user_input="do j1")
            await trio.sleep(close_after)
    return session, executed, closes, added


def _one_output_per_call(session: AgentSession) -> dict[str, list]:
    items = session.history.items
    calls = [i.call_id for i in items if i.type == "function_call"]
    outputs: dict[str, list] = {}
    for i in items:
        if i.type == "function_call_output":
            outputs.setdefault(i.call_id, []).append(i)
    assert Counter(calls) == Counter({c: 1 for c in calls}), items
    assert set(outputs) == set(calls) and all(len(v) == 1 for v in outputs.values()), items
    return outputs


async def test_close_mid_step_keeps_a_finished_tool_result(autojump_clock):
    # the tool ends at once (0.3); the 6 s reply is still playing when the session closes
    session, executed, closes, added = await _close_during(Worker(0.0), _work_actions(), 2.0)
    outputs = _one_output_per_call(session)
    assert [o.output for o in outputs["call_j1"]] == ["did j1"]
    assert len(executed) == 1 and [o.output for o in executed[0].function_call_outputs] == [
        "did j1"]
    assert executed[0].has_tool_reply is False  # no reply is generated while closing
    # 22: the reply cut short by the close is saved as interrupted
    said = [ev.item for ev in added if ev.item.type == "message" and ev.item.role == "assistant"]
    assert len(said) == 1 and said[0].interrupted is True, said
    assert len(closes) == 1


async def test_close_while_a_tool_runs_answers_it_with_a_cancelled_output(autojump_clock):
    agent = Worker(30.0)
    session, executed, closes, _ = await _close_during(agent, _work_actions(), 2.0)
    assert agent.journal == ["start j1"]
    outputs = _one_output_per_call(session)
    (output,) = outputs["call_j1"]
    assert output.is_error and "cancelled" in output.output and "closed" in output.output
    assert len(executed) == 1 and executed[0].function_call_outputs == [output]
    assert len(closes) == 1


async def test_close_before_the_reply_plays_leaves_no_call_without_output(autojump_clock):
    for close_after in (0.05, 0.1, 0.2, 0.25, 0.3, 0.31, 0.5, 0.6):
        agent = Worker(0.2)
        session, executed, closes, _ = await _close_during(agent, _work_actions(), close_after)
        _one_output_per_call(session)
        assert len(closes) == 1 and len(executed) <= 1, close_after


class AskTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="ask")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask something")


class AwaitsInOnEnter(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="parent")
        self.seen: list[str] = []

    async def on_enter(self) -> None:
        self.seen.append("on_enter")
        try:
            await AskTask()
        except ToolError as e:
            self.seen.append(f"ToolError: {e}")
            raise
        except trio.Cancelled:
            self.seen.append("Cancelled")
            raise


async def test_close_while_on_enter_awaits_a_task_raises_tool_error_there(autojump_clock):
    # the order of same-time wakeups varies from run to run: try each point several times
    for close_after in [0.0, 0.001, 0.5, 3.0] * 8:
        agent = AwaitsInOnEnter()
        closes = []
        with trio.fail_after(30):
            async with AgentSession(llm=FakeLLM()) as session:
                session.on("close", closes.append)
                await session.start(agent)
                await trio.sleep(close_after)
        # the task is cancelled (or, closed before it started, refused as LiveKit refuses it)
        assert agent.seen in (["on_enter", "ToolError: AgentTask ask_task is cancelled"],
                              ["on_enter", "ToolError: the activity that awaited the inline "
                               "task is closing"]), (close_after, agent.seen)
        assert len(closes) == 1


class Stubborn(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="stubborn")

    @function_tool
    async def commit_payment(self, ctx: RunContext) -> str:
        """Commit a payment that must not be cut half way."""
        with trio.CancelScope(shield=True):
            await trio.sleep(100)
        return "paid"


async def test_a_shielded_tool_overrunning_the_close_grace_is_reported(autojump_clock, caplog):
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="commit_payment", arguments="{}",
                                               call_id="pay1")], input="pay")
    session = AgentSession(llm=FakeLLM(a.llm_responses), close_grace=5.0)
    closes, warned_at = [], []

    class _Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING and "commit_payment" in record.getMessage():
                warned_at.append(trio.current_time())

    watch = _Watch()
    logging.getLogger("agents_trio").addHandler(watch)
    try:
        with trio.fail_after(300):
            async with session:
                session.on("close", closes.append)
                await session.start(Stubborn())
                session.generate_reply(user_input="pay")
                await trio.sleep(1.0)
                started = trio.current_time()
                await session.aclose()
                took = trio.current_time() - started
    finally:
        logging.getLogger("agents_trio").removeHandler(watch)
    # Trio cannot break the shield: the close waits for the tool, documented ...
    assert 98.0 <= took <= 100.5
    # ... but not silently: a warning names the tool once the grace has passed,
    assert warned_at and abs(warned_at[0] - (started + 5.0)) < 0.01, warned_at
    # and the close reports the overrun
    (close,) = closes
    assert close.overrun is not None and 93.0 <= close.overrun.seconds <= 95.5
    assert close.overrun.tools == ["commit_payment"]
    outputs = _one_output_per_call(session)
    assert [o.output for o in outputs["pay1"]] == ["paid"]


async def test_close_mid_speech_sends_the_heard_text_to_the_transcription(autojump_clock):
    # 22: the user heard part of the reply before the close: the transcription output gets
    # that part (flushed), as the history does
    session, _, closes, added = await _close_during(Worker(0.0), _work_actions(), 2.0)
    said = [ev.item for ev in added if ev.item.type == "message" and ev.item.role == "assistant"]
    assert len(said) == 1 and said[0].interrupted
    assert session.output.transcription.messages == [said[0].text_content]


async def test_a_reply_cut_short_by_a_fatal_error_is_saved_as_interrupted(autojump_clock):
    a = FakeActions()
    a.add_llm("A long story that goes on and on.", input="story")
    a.add_tts(8.0)
    a.add_llm_error(RuntimeError("model down"), input="more", ttft=0.1)
    session = create_session(a, extra_kwargs={"max_unrecoverable_errors": 0})
    closes, added = [], []
    session.on("close", closes.append)
    session.on("conversation_item_added", added.append)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            session.generate_reply(user_input="story")
            await trio.sleep(2.0)
            session.generate_reply(user_input="more")  # its LLM fails at once: fatal
            await trio.sleep(20.0)
    (close,) = closes
    assert close.reason == "error" and isinstance(close.error, RuntimeError)
    said = [ev.item for ev in added if ev.item.type == "message" and ev.item.role == "assistant"]
    assert len(said) == 1 and said[0].interrupted is True, said
    assert 0 < len(said[0].text_content) < len("A long story that goes on and on.")


class _BrokenTranscription(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")

    async def transcription_node(self, text, model_settings):
        async for chunk in text:
            if chunk.startswith("boo"):  # the first chunk of "boom goes the node."
                raise RuntimeError("transcription node failed")
            yield chunk


async def test_a_failing_transcription_node_is_an_error_event_not_a_crash(autojump_clock):
    a = FakeActions()
    a.add_llm("boom goes the node.", input="one")
    a.add_tts(1.0)
    a.add_llm("All fine.", input="two")
    a.add_tts(1.0)
    session = create_session(a)
    errors, closes = [], []
    session.on("error", errors.append)
    session.on("close", closes.append)
    with trio.fail_after(60):
        async with session:
            await session.start(_BrokenTranscription())
            session.input.audio.push(0.1)
            await session.generate_reply(user_input="one")
            await session.generate_reply(user_input="two")
            await trio.sleep(1.0)
    assert [str(e.error) for e in errors] == ["transcription node failed"]
    assert session.output.transcription.messages == ["All fine."]
    assert len(closes) == 1 and closes[0].reason == "user_initiated"
