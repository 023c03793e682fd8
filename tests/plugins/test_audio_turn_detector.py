"""LiveKit's audio end-of-turn detector (``inference.TurnDetector``) in a session.

LiveKit's own detector and stream classes run unchanged; only the transport under the stream
is scripted here (LiveKit's ``_StreamingTurnDetectionTransport`` protocol), so the requests,
withdrawals, flushes and fallbacks are LiveKit's code reacting to what the session does.
Timelines run on the autojump clock: one user turn, speech 0.5-1.5 s; the harness's VAD
reports raw silence every 0.05 s, so a prediction is requested at 1.7 s (0.2 s of silence),
its end of speech comes at 2.0 s, the final transcript at 2.0 s too; endpointing 0.5 / 6.0.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from livekit.agents import inference as lk_inference  # noqa: E402
from livekit.agents.inference.eot.base import _BaseStreamingTurnDetectorStream  # noqa: E402

from agents_trio import Agent, AgentSession, inference, open_bridge  # noqa: E402
from agents_trio.audio_turn import AudioTurnDetector  # noqa: E402
from agents_trio.options import check_turn_detection  # noqa: E402
from agents_trio.plugins import AudioTurnDetectorAdapter, adapt  # noqa: E402
from agents_trio.testing import FakeActions, create_session, run_session  # noqa: E402

CLOUD = {"base_url": "http://127.0.0.1:9", "api_key": "key", "api_secret": "secret"}


class ScriptedTransport:
    """LiveKit's transport protocol, answering each request from a script after ``latency``
    seconds (on the loop's clock, which is Trio's): a probability, ``None`` (never answers)
    or an exception (the transport's ``run`` fails with it at the request)."""

    def __init__(self, answers: list[float | None | BaseException], *, latency: float = 0.1
                 ) -> None:
        self.answers = list(answers)
        self.latency = latency
        self.requests: list[tuple[float, str]] = []
        self.samples = 0
        self.flushes = 0
        self.detached = False
        self._stream: _BaseStreamingTurnDetectorStream | None = None
        self._failed: asyncio.Future[None] | None = None

    @property
    def session_id(self) -> str | None:
        return None

    def attach(self, stream: _BaseStreamingTurnDetectorStream) -> None:
        self._stream = stream

    def detach(self) -> None:
        self.detached = True

    async def run(self) -> None:
        assert self._stream is not None
        self._failed = asyncio.get_running_loop().create_future()
        drain = asyncio.ensure_future(self._stream._drain_audio_channel())
        done, _ = await asyncio.wait([drain, self._failed], return_when=asyncio.FIRST_COMPLETED)
        drain.cancel()
        if self._failed in done:
            self._failed.result()

    def run_inference(self, request_id: str) -> None:
        loop = asyncio.get_running_loop()
        self.requests.append((loop.time(), request_id))
        answer = self.answers.pop(0) if self.answers else 0.9
        if isinstance(answer, BaseException):
            assert self._failed is not None
            self._failed.set_exception(answer)
        elif answer is not None:
            assert self._stream is not None
            loop.call_later(self.latency, self._stream._resolve_prediction, request_id,
                            answer)

    def push_frame(self, frame: Any) -> None:
        self.samples += frame.samples_per_channel

    def flush(self) -> None:
        self.flushes += 1


class ScriptedDetector(lk_inference.TurnDetector):
    """LiveKit's detector whose streams use a :class:`ScriptedTransport`."""

    def __init__(self, transport: ScriptedTransport, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.transport = transport

    def stream(self, **_: Any) -> _BaseStreamingTurnDetectorStream:
        return _BaseStreamingTurnDetectorStream(
            detector=self, opts=self._opts, transport=self.transport, model=self.model,
            local_fallback=self._local_fallback)


async def _user_committed_at(detector: object, *, stt: bool = True, on_agent: bool = False,
                             vad: bool = True) -> tuple[float, list[Any]]:
    actions = FakeActions()
    actions.add_user_speech(0.5, 1.5, "I was thinking")
    actions.add_llm("Go on.")
    actions.add_tts(0.5)
    turn_handling = {"turn_detection": detector}
    session = create_session(actions, turn_handling=None if on_agent else turn_handling,
                             with_stt=stt)
    agent = Agent(instructions="x", turn_handling=turn_handling if on_agent else None)
    if not vad:
        session.vad = None
    committed: list[float] = []
    errors: list[Any] = []
    session.on("conversation_item_added", lambda ev: committed.append(ev.created_at)
               if getattr(ev.item, "role", "") == "user" else None)
    session.on("error", errors.append)
    async with open_bridge() as bridge:
        with trio.fail_after(60):
            t0 = await run_session(session, agent, drain_delay=8.0)
        assert bridge.statistics().asyncio_tasks == 0
    (at,) = committed
    return at - t0, errors


@pytest.mark.parametrize("probability, committed_at, on_agent", [
    # likely (above v1-mini's shipped 0.36 for English): at the end of speech, 2.0 s
    (0.9, 2.0, False),
    # unlikely: max_delay (6.0) after the speech ended at 1.5 s
    (0.1, 7.5, False),
    # the same, the detector given to the agent instead of the session
    (0.1, 7.5, True),
])
async def test_a_prediction_sets_the_end_of_turn_delay(
        autojump_clock: trio.testing.MockClock, probability: float, committed_at: float,
        on_agent: bool) -> None:
    transport = ScriptedTransport([probability])
    detector = ScriptedDetector(transport, version="v1-mini")
    # LiveKit's object, adapted on its own
    at, errors = await _user_committed_at(detector, on_agent=on_agent)
    assert at == pytest.approx(committed_at, abs=0.06)
    assert not errors
    # one request, 0.2 s into the silence that followed the speech (1.5 s)
    assert [round(t, 2) for t, _ in transport.requests] == [pytest.approx(1.7, abs=0.06)]
    assert transport.samples == 1600  # the 0.1 s of audio the harness pushes, at 16 kHz
    assert transport.flushes >= 1  # the committed turn flushed it
    assert transport.detached  # the stream was closed with the session


async def test_an_early_likely_answer_ends_the_turn_before_the_vads_end_of_speech(
        autojump_clock: trio.testing.MockClock) -> None:
    """Without an STT the turn is decided at the VAD's end of speech (2.0 s) on a likely
    prediction; the requested prediction was answered at 1.8 s and is used as it is."""
    transport = ScriptedTransport([0.95])
    at, errors = await _user_committed_at(
        AudioTurnDetectorAdapter(ScriptedDetector(transport, version="v1-mini")), stt=False)
    assert at == pytest.approx(2.0, abs=0.06)
    assert not errors


async def test_no_answer_within_the_prediction_timeout_falls_back_to_min_delay(
        autojump_clock: trio.testing.MockClock) -> None:
    transport = ScriptedTransport([None])
    at, errors = await _user_committed_at(ScriptedDetector(transport, version="v1-mini"))
    # the decision at 2.0 s waits LiveKit's 1.0 s prediction timeout, then min_delay has
    # long passed: committed at 3.0 s
    assert at == pytest.approx(3.0, abs=0.06)
    assert not errors


async def test_a_failing_gateway_without_local_fallback_commits_on_min_delay(
        autojump_clock: trio.testing.MockClock) -> None:
    transport = ScriptedTransport([RuntimeError("gateway went away")])
    detector = ScriptedDetector(transport, version="v1", local_fallback=False, **CLOUD)
    at, errors = await _user_committed_at(detector)
    # LiveKit answers the request in flight with 1.0 and stops detecting: min_delay (0.5)
    # after the speech, reached at the decision (2.0 s)
    assert at == pytest.approx(2.0, abs=0.06)


async def test_without_a_vad_the_detector_is_not_fed(
        autojump_clock: trio.testing.MockClock) -> None:
    """As in LiveKit: the detector needs the VAD's silence to ask for predictions, so without
    a VAD it is left out (no stream) and turns end on the STT and min_delay."""
    transport = ScriptedTransport([0.1])
    at, errors = await _user_committed_at(ScriptedDetector(transport, version="v1-mini"),
                                          vad=False)
    assert transport.requests == [] and transport.samples == 0 and not transport.detached
    # min_delay after the user stopped as the STT saw it (not max_delay: 1.5 + 6.0)
    assert at == pytest.approx(2.2, abs=0.06)


def test_construction_checks_values_and_does_not_connect(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    for name in ("LIVEKIT_API_KEY", "LIVEKIT_API_SECRET", "LIVEKIT_INFERENCE_API_KEY",
                 "LIVEKIT_INFERENCE_API_SECRET"):
        monkeypatch.delenv(name, raising=False)
    detector = inference.TurnDetector(version="v1", **CLOUD)  # no connection made
    assert isinstance(detector, AudioTurnDetector)
    assert detector.model == "turn-detector-v1"
    check_turn_detection(detector)
    assert inference.TurnDetector(version="v1-mini").model == "turn-detector-v1-mini"
    with pytest.raises(ValueError, match="LIVEKIT_API_KEY"):
        inference.TurnDetector(version="v1")
    with pytest.raises(ValueError, match="version"):
        inference.TurnDetector(version="v2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unlikely_threshold"):
        inference.TurnDetector(version="v1-mini", unlikely_threshold=1.5)
    with pytest.raises(TypeError, match="backchannel_threshold"):
        inference.TurnDetector(version="v1-mini", backchannel_threshold={"en": "high"})
    with pytest.raises(ValueError, match="sample_rate"):
        inference.TurnDetector(version="v1-mini", sample_rate=0)
    with pytest.raises(TypeError, match="local_fallback"):
        inference.TurnDetector(version="v1-mini", local_fallback="no")  # type: ignore[arg-type]


def test_livekit_detectors_are_adapted_where_they_are_given() -> None:
    lk_detector = lk_inference.TurnDetector(version="v1-mini")
    adapted = adapt(lk_detector)
    assert isinstance(adapted, AudioTurnDetectorAdapter) and adapted.detector is lk_detector
    session = AgentSession(turn_handling={"turn_detection": lk_detector})
    detection = session.turn_handling_overrides["turn_detection"]
    assert isinstance(detection, AudioTurnDetectorAdapter)
    assert detection.detector is lk_detector
    agent = Agent(instructions="hi", turn_handling={"turn_detection": lk_detector})
    assert isinstance(agent.turn_handling["turn_detection"], AudioTurnDetectorAdapter)


def test_update_options_adapts_a_livekit_detector() -> None:
    session = AgentSession()
    lk_detector = lk_inference.TurnDetector(version="v1-mini")
    session.update_options(turn_detection=lk_detector)
    adapted = session.turn_handling_overrides["turn_detection"]
    assert isinstance(adapted, AudioTurnDetectorAdapter) and adapted.detector is lk_detector
