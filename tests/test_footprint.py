"""What a running session holds: every object it keeps alive is walked by each full garbage
collection of the process, so sessions per process depend on it (see docs/deployment.md).
These pin structural facts, not counts that drift with every feature."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, FakeAudioInput, create_session


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You answer.")


def _alive(type_name: str) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__ == type_name)


async def test_a_running_voice_session_keeps_no_task_status_of_its_starts(autojump_clock):
    # a started task that keeps its task_status keeps start()'s temporary nursery (and its
    # cancel scope) alive for as long as it runs: the session's main task, the activity and
    # the recognition drop theirs once started
    before = _alive("_TaskStatus")
    async with _answered_one_turn() as session:
        assert _alive("_TaskStatus") == before
        await session.aclose()


@asynccontextmanager
async def _answered_one_turn() -> AsyncIterator[AgentSession]:
    """A voice session that answered one turn and listens again."""
    a = FakeActions()
    a.add_user_speech(0.5, 1.5, "Hello there.")
    a.add_llm("Hi!")
    a.add_tts(0.5)
    session = create_session(a)
    async with session:
        await session.start(Desk())
        audio = session.input.audio
        assert isinstance(audio, FakeAudioInput)
        audio.push(0.1)  # the fake input plays its script from the first push
        await trio.sleep(8)
        assert [m.text_content for m in session.history.items
                if getattr(m, "role", None) == "assistant"] == ["Hi!"]
        yield session


async def test_the_speech_scheduler_is_no_task_of_its_own(autojump_clock):
    a = FakeActions()
    session = create_session(a)
    async with session:
        await session.start(Desk())
        await trio.sleep(1)
        names = {t.name for t in _tasks_under(trio.lowlevel.current_root_task())}
        assert "agents_trio.activity.Activity.run" in names
        assert not any(name.endswith("._scheduler") for name in names)
        await session.aclose()


def _tasks_under(task: trio.lowlevel.Task) -> list[trio.lowlevel.Task]:
    out = [task]
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            out += _tasks_under(child)
    return out


async def test_without_a_transcription_output_a_speech_paces_no_transcript(autojump_clock):
    # the transcript synchronizer releases words as the audio plays, for a transcription
    # output; with none (as LiveKit, which only synchronizes for one), it is no task at all,
    # and what was played still reaches the history
    a = FakeActions()
    a.add_user_speech(0.5, 1.5, "Hello there.")
    a.add_llm("Hi there, how can I help you today?")
    a.add_tts(3.0)
    for transcribed in (True, False):
        session = create_session(a)
        if not transcribed:
            session.output.transcription = None
        names: set[str] = set()
        async with session:
            await session.start(Desk())
            audio = session.input.audio
            assert isinstance(audio, FakeAudioInput)
            audio.push(0.1)
            for _ in range(80):
                await trio.sleep(0.1)
                names |= {t.name for t in _tasks_under(trio.lowlevel.current_root_task())}
            assert [m.text_content for m in session.history.items
                    if getattr(m, "role", None) == "assistant"] == [
                        "Hi there, how can I help you today?"]
            await session.aclose()
        paced = any(name.endswith("._pace_transcripts") for name in names)
        assert paced == transcribed


async def test_a_finished_speech_is_not_kept_while_the_session_listens(autojump_clock):
    # the scheduler waits for the next speech: it must not keep the last one (its flags,
    # lists and cancel scope) alive until then
    async with _answered_one_turn() as session:
        assert _alive("SpeechHandle") == 0
        await session.aclose()


async def test_a_listening_session_holds_no_generator_based_block_of_the_runtime(autojump_clock):
    # a block held for the whole session (the activity's owner, the session's scoped calls)
    # is a class: a generator-based one keeps its generator and frame alive as long. The one
    # left is the agent's own (it sets the agent's private state, so it stays the agent's
    # method)
    before = _generator_blocks()
    a = FakeActions()
    session = create_session(a)
    async with session:
        await session.start(Desk())
        await trio.sleep(1)
        held = _generator_blocks() - before
        assert sorted(held.elements()) == ["Agent.running_in"]
        await session.aclose()


def _generator_blocks() -> Counter[str]:
    """The runtime's generator-based context managers alive, by the generator's function
    (the test fakes' own are left out)."""
    gc.collect()
    out: Counter[str] = Counter()
    for o in gc.get_objects():
        if type(o).__name__ in ("_GeneratorContextManager", "_AsyncGeneratorContextManager"):
            code = getattr(o.gen, "gi_code", None) or o.gen.ag_code
            if "agents_trio" in code.co_filename and "testing" not in code.co_filename:
                out[code.co_qualname] += 1
    return out
