"""Faults of the recognition streams (issue 15, items 8 and 9).

A VAD or STT stream that fails — its ``push_frame`` raises, its iteration raises (an
``APIError`` or any other exception), or opening it raises — is reported as an ``error`` event
and reopened with backoff (0.5 s, then doubling). A bounded number of consecutive failures
(``max_unrecoverable_errors``; a stream that delivered an event resets the count) closes the
session with reason ``error`` and the error attached. What the user said so far is kept, and a
VAD that dies during speech does not leave the user "speaking".

LiveKit Agents recreates the STT stream 0.5 s after an ``APIError`` (reference §3.1) and
resets the user state when its VAD task ends; before this fix, a non-``APIError`` escaped
``async with AgentSession(...)`` as a nested ``ExceptionGroup`` and a failed VAD was never
restarted.
"""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession, APIError
from agents_trio.testing import FakeAudioInput, FakeLLM, FakeLLMResponse
from recognition_fakes import ManualRecognizer, final, interim, stt_event, vad_event


def _session(vad: ManualRecognizer | None, stt: ManualRecognizer | None, *,
             answers: dict[str, str] | None = None, **kwargs) -> AgentSession:
    llm = FakeLLM([FakeLLMResponse(input=k, content=v) for k, v in (answers or {}).items()])
    session = AgentSession(vad=vad, stt=stt, llm=llm, aec_warmup_duration=None,
                           user_away_timeout=None, **kwargs)
    session.input.audio = FakeAudioInput()
    return session


class Events:
    def __init__(self, session: AgentSession) -> None:
        self.errors: list = []
        self.closes: list = []
        self.user_states: list[tuple[str, float]] = []
        self.closed = trio.Event()
        self.items: list = []
        session.on("error", self.errors.append)
        session.on("close", self._on_close)
        session.on("user_state_changed",
                   lambda ev: self.user_states.append((ev.new_state, trio.current_time())))
        session.on("conversation_item_added", lambda ev: self.items.append(ev.item))

    def _on_close(self, ev) -> None:
        self.closes.append(ev)
        self.closed.set()

    def user_messages(self) -> list[str]:
        return [i.text_content for i in self.items if getattr(i, "role", None) == "user"]

    def assistant_messages(self) -> list[str]:
        return [i.text_content for i in self.items if getattr(i, "role", None) == "assistant"]


async def test_vad_push_frame_error_is_reported_and_the_vad_restarted(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt)
    ev = Events(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            vad.current.push_error = RuntimeError("vad bug")
            session.input.audio.push(0.1)
            await trio.sleep(1.0)
            session.input.audio.push(0.1)   # reaches the new stream
            await trio.sleep(0.1)
            assert [type(e.error) for e in ev.errors] == [RuntimeError]
            assert ev.errors[0].source is vad
            assert [round(t - t0, 2) for t in vad.opened_at] == [0.0, 0.5]
            assert vad.current.pushed == 0.1
    assert [c.reason for c in ev.closes] == ["user_initiated"]


async def test_an_stt_that_keeps_raising_closes_the_session_with_the_error(autojump_clock):
    error = ValueError("stt bug")
    vad, stt = ManualRecognizer(), ManualRecognizer(push_error=error)
    session = _session(vad, stt)
    ev = Events(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()

            async def feed() -> None:
                while True:
                    session.input.audio.push(0.1)
                    await trio.sleep(0.1)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(feed)
                await ev.closed.wait()
                nursery.cancel_scope.cancel()
    # each failure (at the first frame its stream gets) is followed by a restart after 0.5,
    # 1.0 and 2.0 s; the fourth consecutive failure closes
    assert len(stt.failed_at) == 4 and stt.opened_at[0] == t0
    assert [round(opened - failed, 1) for failed, opened
            in zip(stt.failed_at, stt.opened_at[1:])] == [0.5, 1.0, 2.0]
    assert len(ev.errors) == 4 and all(e.error is error for e in ev.errors)
    (close,) = ev.closes
    assert close.reason == "error" and close.error is error


async def test_vad_api_error_during_speech_restarts_it_and_the_turn_is_answered(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt, answers={"hello there": "hi!"})
    ev = Events(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            await trio.sleep(0.5)
            vad.current.fail(APIError("vad connection lost"))
            await trio.sleep(0.1)
            # the user is not left "speaking"
            assert session.user_state == "listening"
            stt.current.send(final("hello there"))
            await trio.sleep(2.0)
            assert [round(t - t0, 2) for t in vad.opened_at] == [0.0, 1.0]
    assert [str(e.error) for e in ev.errors] == ["vad connection lost"]
    assert [s for s, _ in ev.user_states] == ["speaking", "listening"]
    assert ev.user_messages() == ["hello there"]
    assert ev.assistant_messages() == ["hi!"]


async def test_stt_failure_mid_utterance_keeps_the_words_already_transcribed(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt, answers={"tell me about the weather": "sunny"})
    ev = Events(session)
    transcripts: list[tuple[str, bool]] = []
    session.on("user_input_transcribed", lambda e: transcripts.append((e.transcript, e.is_final)))
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            stt.current.send(final("tell me"))
            stt.current.send(interim("about the weather"))
            await trio.sleep(0.3)
            stt.current.fail(RuntimeError("stt crashed"))
            await trio.sleep(0.5)
            vad.current.send(vad_event("end_of_speech", speech=1.0, silence=0.5))
            await trio.sleep(2.0)
    assert [round(t - t0, 2) for t in stt.opened_at] == [0.0, 0.8]
    assert [type(e.error) for e in ev.errors] == [RuntimeError]
    assert ("about the weather", True) in transcripts
    assert ev.user_messages() == ["tell me about the weather"]
    assert ev.assistant_messages() == ["sunny"]
    assert [c.reason for c in ev.closes] == ["user_initiated"]


async def test_failing_to_open_the_stt_is_retried(autojump_clock):
    vad = ManualRecognizer()
    stt = ManualRecognizer(open_errors=[APIError("connect refused"), APIError("connect refused")])
    session = _session(vad, stt)
    ev = Events(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            t0 = trio.current_time()
            await trio.sleep(3.0)
            assert [round(t - t0, 2) for t in stt.opened_at] == [0.0, 0.5, 1.5]
            assert len(stt.streams) == 1
    assert [str(e.error) for e in ev.errors] == ["connect refused", "connect refused"]
    assert [c.reason for c in ev.closes] == ["user_initiated"]


async def test_a_stream_that_delivered_events_resets_the_failure_count(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt, max_unrecoverable_errors=1)
    ev = Events(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            for _ in range(4):
                stream = stt.current
                stream.send(interim("hmm"))      # the stream works: the count restarts
                stream.fail(APIError("dropped"))
                await trio.sleep(1.0)
            assert len(stt.streams) == 5 and not ev.closes
            # a second failure in a row, with nothing delivered since the first, exceeds it
            stt.current.fail(APIError("dropped"))
            await ev.closed.wait()
    assert len(ev.errors) == 5
    assert [c.reason for c in ev.closes] == ["error"]


class NodeAgent(Agent):
    """Overrides stt_node: the session runs the node instead of the STT stream."""

    def __init__(self) -> None:
        super().__init__(instructions="x")
        self.calls = 0

    async def stt_node(self, audio, model_settings):
        self.calls += 1
        if self.calls == 1:
            async for _frame in audio:
                raise KeyError("node bug")
        async for ev in super().stt_node(audio, model_settings):
            yield ev


async def test_an_overridden_stt_node_that_raises_is_called_again(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt)
    ev = Events(session)
    agent = NodeAgent()
    with trio.fail_after(30):
        async with session:
            await session.start(agent)
            session.input.audio.push(0.1)
            await trio.sleep(1.0)
            session.input.audio.push(0.1)
            await trio.sleep(0.1)
            assert agent.calls == 2
            assert stt.current.pushed == 0.1
    assert [type(e.error) for e in ev.errors] == [KeyError]
    assert [c.reason for c in ev.closes] == ["user_initiated"]


async def test_without_a_vad_an_stt_failure_during_speech_ends_the_user_speech(
        autojump_clock):
    """Without a VAD, the STT's own speech events drive the user state; a failure during
    speech returns the user to listening."""
    stt = ManualRecognizer()
    session = _session(None, stt)
    ev = Events(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            stt.current.send(stt_event("start_of_speech"))
            await trio.sleep(0.2)
            stt.current.fail(APIError("gone"))
            await trio.sleep(0.1)
            assert session.user_state == "listening"
    assert [s for s, _ in ev.user_states] == ["speaking", "listening"]


async def test_a_realtime_model_refusing_the_users_audio_is_reported_once(autojump_clock):
    from agents_trio.testing import FakeRealtimeModel

    model = FakeRealtimeModel()
    session = AgentSession(llm=model, aec_warmup_duration=None, user_away_timeout=None)
    session.input.audio = FakeAudioInput()
    ev = Events(session)

    def refuse(frame) -> None:
        raise RuntimeError("realtime socket closed")

    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            (rt,) = model.live_sessions
            accept = rt.push_audio
            rt.push_audio = refuse
            for _ in range(3):
                session.input.audio.push(0.1)
                await trio.sleep(0.1)
            assert [str(e.error) for e in ev.errors] == ["realtime socket closed"]
            rt.push_audio = accept
            session.input.audio.push(0.1)
            await trio.sleep(0.1)
            assert abs(rt.audio_pushed - 0.1) < 1e-9
            rt.push_audio = refuse        # a new run of failures is reported again
            session.input.audio.push(0.1)
            await trio.sleep(0.1)
            assert len(ev.errors) == 2
    assert [c.reason for c in ev.closes] == ["user_initiated"]


async def test_realtime_llm_turn_detection_without_a_realtime_model_falls_back(autojump_clock):
    """LiveKit falls back to the automatic choice (with a warning) when "realtime_llm" has no
    server turn detection to rely on; before, nobody decided the turn."""
    vad, stt = ManualRecognizer(), ManualRecognizer()
    session = _session(vad, stt, answers={"hello": "hi!"},
                       turn_handling={"turn_detection": "realtime_llm"})
    ev = Events(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            vad.current.send(vad_event("start_of_speech", speech=0.05))
            stt.current.send(final("hello"))
            vad.current.send(vad_event("end_of_speech", speech=1.0, silence=0.5))
            await trio.sleep(1.0)
            assert session.turn_detection == "vad"
    assert ev.assistant_messages() == ["hi!"]
