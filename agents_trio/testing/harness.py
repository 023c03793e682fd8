"""create_session / run_session: run a FakeActions script against an agent."""

from __future__ import annotations

from typing import Any

import trio

from ..agent import Agent
from ..session import AgentSession
from .actions import FakeActions
from .fake_io import FakeAudioInput, FakeAudioOutput, FakeTextOutput
from .fake_models import FakeLLM, FakeSTT, FakeTTS, FakeVAD

_HARNESS_TURN_HANDLING: dict[str, dict[str, Any]] = {
    "endpointing": {"min_delay": 0.5, "max_delay": 6.0},
    "interruption": {"min_duration": 0.5, "false_interruption_timeout": 2.0},
}


def merge_turn_handling(base: dict[str, Any], override: dict[str, Any] | None
                        ) -> dict[str, Any]:
    """``base`` with ``override`` applied per key (nested option dicts are merged)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = value
    return out


def create_session(actions: FakeActions, *, speed_factor: float = 1.0,
                   turn_handling: dict[str, Any] | None = None,
                   extra_kwargs: dict[str, Any] | None = None, can_pause_audio: bool = False,
                   with_stt: bool = True) -> AgentSession:
    """A session on fakes that follow ``actions``.

    VAD min_silence 0.5 s / min_speech 0.05 s, VAD end-of-turn detection, endpointing 0.5 /
    6.0, interruption min_duration 0.5 and false_interruption_timeout 2.0, no AEC warm-up
    (``extra_kwargs={"aec_warmup_duration": 3.0}`` turns it on); ``turn_handling`` overrides
    per key. ``session.input.audio.push(0.1)`` starts the script's clock.
    """
    actions = actions.scaled(speed_factor)
    session = AgentSession(
        vad=FakeVAD(actions.user_speeches),
        stt=FakeSTT(actions.user_speeches) if with_stt else None,
        llm=FakeLLM(actions.llm_responses),
        tts=FakeTTS(actions.tts_responses),
        turn_handling=merge_turn_handling(_HARNESS_TURN_HANDLING, turn_handling),
        **{"aec_warmup_duration": None, **(extra_kwargs or {})},
    )
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput(can_pause=can_pause_audio)
    session.output.transcription = FakeTextOutput()
    return session


async def run_session(session: AgentSession, agent: Agent, *, drain_delay: float = 5.0) -> float:
    """Enter ``session``, start ``agent``, push the first audio, wait for every scripted speech
    to be transcribed, wait ``drain_delay``, drain and close. Returns the time origin ``t0``.

    Cancellation: cancelling it closes the session.
    """
    async with session:
        await session.start(agent)
        t0 = trio.current_time()
        audio = session.input.audio
        assert isinstance(audio, FakeAudioInput), "run_session needs a session from create_session"
        audio.push(0.1)
        recognizer = session.stt if isinstance(session.stt, FakeSTT) else session.vad
        if isinstance(recognizer, (FakeSTT, FakeVAD)):
            await recognizer.speeches_done.wait()
        await trio.sleep(drain_delay)
        try:
            await session.drain()
        except RuntimeError:
            pass
        await session.aclose()
    return t0
