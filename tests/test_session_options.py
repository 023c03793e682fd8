"""Session options: AEC warm-up, the user-away timer, the gap between speeches, interim
transcripts without a VAD, and the trailing user turn on close."""

from __future__ import annotations

from contextlib import asynccontextmanager

import trio

from agents_trio import (Agent, AgentSession, APIError, FunctionToolCall, RunContext, SpeechData,
                         SpeechEvent, SpeechEventType, function_tool)
from agents_trio.testing import (FakeActions, FakeAudioInput, FakeAudioOutput, FakeLLM, FakeSTT,
                                 FakeTTS, create_session, run_session)
from timeline import Recorder, near

STORY = "Here is a long story for you, about a brave knight."


def _story(stop_at: tuple[float, float]) -> FakeActions:
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Tell me a story.")
    a.add_llm(STORY)
    a.add_tts(10.0)
    a.add_user_speech(*stop_at, "Stop!")
    return a


async def _interrupted_at(extra_kwargs: dict) -> float:
    session = create_session(_story((4.0, 5.0)), extra_kwargs=extra_kwargs)
    rec = Recorder(session)
    with trio.fail_after(60):
        rec.t0 = await run_session(session, Agent(instructions="tell stories"))
    (finished,) = session.output.audio.playback_finished_events
    assert finished.interrupted
    return rec.t(finished)


async def test_aec_warmup_ignores_voice_interruptions_until_the_turn_ends(autojump_clock):
    assert near(await _interrupted_at({"aec_warmup_duration": 3.0}), 5.5)


async def test_without_warmup_the_voice_interrupts_at_the_threshold(autojump_clock):
    assert near(await _interrupted_at({}), 4.5)


class SlowTool(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="slow")

    @function_tool
    async def work(self, ctx: RunContext) -> None:
        """Work for 20 s."""
        await trio.sleep(20)


async def test_user_becomes_away_after_mutual_silence_but_not_during_a_tool(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 1.5, "do the work")
    a.add_llm("", tool_calls=[FunctionToolCall(name="work", arguments="{}", call_id="w")])
    session = create_session(a, extra_kwargs={"user_away_timeout": 15.0})
    rec = Recorder(session)
    with trio.fail_after(120):
        rec.t0 = await run_session(session, SlowTool(), drain_delay=40.0)
    away = [rec.t(ev) for ev in rec.of("user_state_changed") if ev.new_state == "away"]
    # the tool runs 2.0-22.0: the away window starts in full when it ends
    assert len(away) == 1 and near(away[0], 37.0)


async def test_a_final_transcript_brings_the_user_back_from_away(autojump_clock):
    a = FakeActions()
    a.add_user_speech(20.0, 21.0, "still there?")
    session = create_session(a, extra_kwargs={"user_away_timeout": 5.0})
    rec = Recorder(session)
    with trio.fail_after(120):
        rec.t0 = await run_session(session, Agent(instructions="x"), drain_delay=1.0)
    states = [(ev.new_state, round(rec.t(ev), 1)) for ev in rec.of("user_state_changed")]
    assert states[:3] == [("away", 5.0), ("speaking", 20.0), ("listening", 21.0)]


class TwoSays(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")

    async def on_enter(self) -> None:
        self.session.say("one")
        self.session.say("two")


async def test_min_consecutive_speech_delay_spaces_speeches(autojump_clock):
    a = FakeActions()
    a.add_tts(1.0, input="one", ttfb=0.0)
    a.add_tts(1.0, input="two", ttfb=0.0)
    session = create_session(a, extra_kwargs={"min_consecutive_speech_delay": 0.7})
    rec = Recorder(session)
    with trio.fail_after(60):
        rec.t0 = await run_session(session, TwoSays(), drain_delay=4.0)
    started = [rec.t(ev) for ev in rec.of("playback_started")]
    finished = [rec.t(ev) for ev in rec.of("playback_finished")]
    assert len(started) == 2 and near(started[1] - finished[0], 0.7)


async def test_interim_transcripts_interrupt_when_there_is_no_vad(autojump_clock):
    a = _story((5.0, 6.0))
    session = AgentSession(stt=FakeSTT(a.user_speeches), llm=FakeLLM(a.llm_responses),
                           tts=FakeTTS(a.tts_responses), aec_warmup_duration=None,
                           turn_handling={"preemptive_generation": {"enabled": False}})
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    rec = Recorder(session)
    with trio.fail_after(60):
        rec.t0 = await run_session(session, Agent(instructions="x"), drain_delay=2.0)
    finished = session.output.audio.playback_finished_events
    assert finished[0].interrupted and near(rec.t(finished[0]), 6.1)


async def test_close_keeps_what_the_user_said_last(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "one more thing")
    session = create_session(a)
    agent = Agent(instructions="x")
    async with session:
        await session.start(agent)
        session.input.audio.push(0.1)
        await trio.sleep(2.3)  # the final transcript arrived at 2.2; the turn would end at 2.5
        await session.aclose()
    users = [i.text_content for i in session.history.items if getattr(i, "role", "") == "user"]
    assert users == ["one more thing"]


class FlakySTT:
    """The first stream fails with a provider error; the next one transcribes."""

    def __init__(self) -> None:
        self.opened = 0

    @asynccontextmanager
    async def stream(self):
        self.opened += 1
        yield _FlakyStream(fail=self.opened == 1)


class _FlakyStream:
    def __init__(self, *, fail: bool) -> None:
        self.fail = fail
        self.frames = 0
        self._send, self._recv = trio.open_memory_channel(10)

    def push_frame(self, frame) -> None:
        self.frames += 1
        if self.frames == 1 and not self.fail:
            self._send.send_nowait(SpeechEvent(type=SpeechEventType.FINAL_TRANSCRIPT,
                                               alternatives=[SpeechData(text="after retry")]))

    def end_input(self) -> None:
        self._send.close()

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self.fail:
            await trio.sleep(0.2)
            raise APIError("stt connection lost")
        try:
            return await self._recv.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


async def test_stt_stream_is_reopened_after_a_provider_error(autojump_clock):
    stt = FlakySTT()
    session = AgentSession(stt=stt, llm=FakeLLM(), turn_handling={"turn_detection": "manual"})
    session.input.audio = FakeAudioInput()
    errors, finals = [], []
    session.on("error", errors.append)
    session.on("user_input_transcribed", lambda ev: finals.append(ev.transcript))
    async with session:
        await session.start(Agent(instructions="x"))
        session.input.audio.push(0.1)
        await trio.sleep(1.0)   # the first stream fails at 0.2, the next opens at 0.7
        session.input.audio.push(0.1)
        await trio.sleep(0.5)
    assert [str(e.error) for e in errors] == ["stt connection lost"]
    assert stt.opened == 2
    assert finals == ["after retry"]
