"""Model resolution without LiveKit: Trio models are kept, what is no model fails at
construction naming the parameter, and neither imports livekit-agents."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeLLM, FakeTTS


def test_trio_models_are_kept() -> None:
    llm, tts = FakeLLM(), FakeTTS()
    session = AgentSession(llm=llm, tts=tts)
    assert (session.llm, session.tts) == (llm, tts)
    agent = Agent(instructions="hi", llm=llm)
    assert agent.llm is llm


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"llm": 42}, r"\(llm=42\): not an LLM model; llm= takes a Trio LLM"),
    ({"tts": FakeLLM()}, r"\(tts=.*\): not a TTS model"),
    ({"stt": object()}, r"\(stt=.*\): not an STT model; stt= takes a Trio STT"),
])
def test_what_is_no_model_is_a_type_error_naming_the_parameter(kwargs: dict[str, object],
                                                               message: str) -> None:
    with pytest.raises(TypeError, match="AgentSession" + message):
        AgentSession(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Agent" + message):
        Agent(instructions="hi", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"AgentSession\(vad=.*\): not a VAD model"):
        AgentSession(vad=object())  # type: ignore[arg-type]


def test_trio_models_do_not_load_livekit_agents() -> None:
    code = ("import sys\n"
            "from agents_trio import Agent, AgentSession\n"
            "from agents_trio.testing import FakeLLM, FakeTTS\n"
            "AgentSession(llm=FakeLLM(), tts=FakeTTS())\n"
            "Agent(instructions='hi', llm=FakeLLM())\n"
            "print('livekit.agents' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
