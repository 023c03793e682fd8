"""An audio output whose ``capture_frame`` blocks (issue 15, item 10).

Each write has a deadline (``audio_write_timeout``, 5 s by default). A write that misses it
is an ``error`` event (``AudioOutputStalled``, source: the output); the speech ends as
interrupted with the text played so far kept, and the output is cleared. If the next speech
stalls too, with no speech played to its end in between, the session closes with reason
``error``.
"""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeAudioOutput, FakeTTS, FakeTTSResponse

TEXT = "Hello there, this is a rather long sentence."


class StallingOutput(FakeAudioOutput):
    """Accepts ``accept`` seconds of audio, then every ``capture_frame`` blocks forever
    (until ``stalled`` is cleared)."""

    def __init__(self, *, accept: float) -> None:
        super().__init__()
        self.accept = accept
        self.captured = 0.0
        self.stalled = True

    async def capture_frame(self, frame) -> None:
        if self.stalled and self.captured >= self.accept - 1e-9:
            await trio.sleep_forever()
        self.captured += frame.duration
        await super().capture_frame(frame)


def _session(output: FakeAudioOutput, **kwargs) -> AgentSession:
    tts = FakeTTS([FakeTTSResponse(input=t, audio_duration=1.0, ttfb=0.2)
                   for t in (TEXT, "second", "third", "fourth")])
    session = AgentSession(tts=tts, aec_warmup_duration=None, user_away_timeout=None, **kwargs)
    session.output.audio = output
    return session


class Events:
    def __init__(self, session: AgentSession) -> None:
        self.errors: list = []
        self.closes: list = []
        self.closed = trio.Event()
        self.items: list = []
        session.on("error", self.errors.append)
        session.on("close", self._on_close)
        session.on("conversation_item_added", lambda ev: self.items.append(ev.item))

    def _on_close(self, ev) -> None:
        self.closes.append(ev)
        self.closed.set()


async def test_a_stalled_write_ends_the_speech_as_interrupted_and_keeps_its_text(autojump_clock):
    output = StallingOutput(accept=0.3)
    session = _session(output)
    ev = Events(session)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            handle = session.say(TEXT)
            with trio.move_on_after(20):
                await handle.wait_for_playout()
            assert handle.done() and handle.interrupted
            assert abs(trio.current_time() - t0 - 5.2) < 1e-6   # ttfb 0.2 + the 5 s deadline
            (error,) = ev.errors
            assert type(error.error).__name__ == "AudioOutputStalled"
            assert error.source is output
            (finished,) = output.playback_finished_events   # the output was cleared
            assert finished.interrupted and abs(finished.playback_position - 0.3) < 1e-6
            (message,) = [i for i in ev.items if getattr(i, "role", "") == "assistant"]
            assert message.interrupted and 0 < len(message.text_content) < len(TEXT)
            assert TEXT.startswith(message.text_content)
            assert session.agent_state == "listening"
            assert not ev.closes
    assert [c.reason for c in ev.closes] == ["user_initiated"]


async def test_a_persisting_stall_closes_the_session_with_the_error(autojump_clock):
    output = StallingOutput(accept=0.3)
    session = _session(output)
    ev = Events(session)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            session.say(TEXT)
            await trio.sleep(6.0)
            session.say("second")
            await ev.closed.wait()
            closed_at = trio.current_time() - t0
    assert abs(closed_at - 11.2) < 1e-6    # the second speech's first write: 6.0 + 0.2 + 5
    assert len(ev.errors) == 2
    (close,) = ev.closes
    assert close.reason == "error" and close.error is ev.errors[-1].error


async def test_a_speech_played_to_its_end_resets_the_stall_count(autojump_clock):
    output = StallingOutput(accept=0.3)
    session = _session(output)
    ev = Events(session)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            with trio.move_on_after(20):
                await session.say(TEXT).wait_for_playout()
            output.stalled = False
            await session.say("second").wait_for_playout()
            output.stalled, output.captured = True, 0.0
            with trio.move_on_after(20):
                await session.say("third").wait_for_playout()
            assert len(ev.errors) == 2
            assert not ev.closes
    assert [c.reason for c in ev.closes] == ["user_initiated"]


async def test_the_write_deadline_is_an_option(autojump_clock):
    output = StallingOutput(accept=0.0)
    session = _session(output, audio_write_timeout=1.5)
    ev = Events(session)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            with trio.move_on_after(20):
                await session.say(TEXT).wait_for_playout()
            assert abs(trio.current_time() - t0 - 1.7) < 1e-6
            assert len(ev.errors) == 1
            # nothing was played: no assistant message
            assert not [i for i in ev.items if getattr(i, "role", "") == "assistant"]


class SlowOutput(FakeAudioOutput):
    """Every write takes ``delay`` (backpressure): slow, but never stalled."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def capture_frame(self, frame) -> None:
        await trio.sleep(self.delay)
        await super().capture_frame(frame)


async def test_the_deadline_is_per_write_not_per_speech(autojump_clock):
    output = SlowOutput(delay=0.04)
    session = _session(output, audio_write_timeout=0.05)
    ev = Events(session)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            handle = session.say(TEXT)
            await handle.wait_for_playout()
            # 100 frames of 10 ms, each written in 0.04 s: 4 s of writes, none late
            assert trio.current_time() - t0 > 4.0
            assert not handle.interrupted and not ev.errors
            (finished,) = output.playback_finished_events
            assert not finished.interrupted


class GatedOutput(FakeAudioOutput):
    """Holds the agent's audio until ``open()`` (as the room output does until someone
    subscribed to the agent's track): waiting for that is not a stall."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = trio.Event()

    async def wait_ready(self) -> None:
        await self.gate.wait()

    async def capture_frame(self, frame) -> None:
        await self.gate.wait()
        await super().capture_frame(frame)


async def test_waiting_for_the_output_to_be_ready_is_not_a_stall(autojump_clock):
    output = GatedOutput()
    session = _session(output)
    ev = Events(session)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            handle = session.say(TEXT)
            await trio.sleep(20.0)
            output.gate.set()
            await handle.wait_for_playout()
            assert abs(trio.current_time() - t0 - 21.0) < 1e-6
            assert not handle.interrupted and not ev.errors
