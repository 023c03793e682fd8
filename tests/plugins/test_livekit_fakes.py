"""``agents_trio.testing.livekit_fakes`` are LiveKit plugins: the same fakes run a session on
LiveKit Agents' own runtime (asyncio, in a process of its own) and on this one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="the fakes are LiveKit plugins")

from livekit.agents import llm as lk_llm
from livekit.agents import utils

from agents_trio import Agent, AgentSession
from agents_trio.testing.livekit_fakes import FakePluginLLM, tool_call

HERE = Path(__file__).resolve().parent


def test_the_fakes_run_sessions_of_livekits_own_runtime() -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent.parent)}
    done = subprocess.run([sys.executable, str(HERE / "livekit_runtime_sessions.py")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["text"] == {"events": [["function_call", "lookup_weather"],
                                         ["function_call_output", "sunny in Paris"],
                                         ["message", "It is sunny in Paris."]],
                              "requests": 2}
    voice = report["voice"]
    assert voice["utterances"] == ["what's the weather"]
    assert voice["tts_texts"] == ["Sunny all day."]
    assert voice["history"] == [["user", "what's the weather"], ["assistant", "Sunny all day."]]
    assert voice["vad_frames"] > 50
    assert voice["audio_seconds"] == pytest.approx(len("Sunny all day.") * 0.01, abs=0.03)


def test_replies_are_scripted_by_key_or_in_sequence() -> None:
    ctx = lk_llm.ChatContext.empty()
    ctx.add_message(role="user", content="hi")
    keyed = FakePluginLLM({"hi": ["Let me check.", tool_call("look", {"q": 1})]},
                          default="?")
    text, call = keyed.reply_for(ctx)
    assert text == "Let me check."
    assert isinstance(call, lk_llm.FunctionToolCall)
    assert (call.name, call.arguments, call.call_id) == ("look", '{"q": 1}', "call_1")
    ctx.add_message(role="user", content="unknown")
    assert keyed.reply_for(ctx) == ["?"]
    in_turn = FakePluginLLM(["one", tool_call("t", call_id="c9"), "three"])
    assert [in_turn.reply_for(ctx) for _ in range(4)][1:] == [
        [tool_call("t", call_id="c9")], ["three"], [""]]


class _HttpLLM(FakePluginLLM):
    """Asks for LiveKit's job HTTP session when a request is made, as gateway plugins do."""

    sessions: list[object] = []

    def chat(self, **kwargs: object) -> lk_llm.LLMStream:  # type: ignore[override]
        self.sessions.append(utils.http_context.http_session())
        return super().chat(**kwargs)  # type: ignore[arg-type]


async def test_a_session_without_a_job_gives_plugins_an_http_session(
        autojump_clock: trio.testing.MockClock) -> None:
    llm = _HttpLLM({"hi": "hello"}, ttft=0.1)
    async with AgentSession(llm=llm) as session:
        await session.start(Agent(instructions="hi"))
        await session.run(user_input="hi")
        await session.run(user_input="hi")
    first, second = llm.sessions
    assert first is second  # one shared session, closed with the session's bridge
    assert first.closed  # type: ignore[attr-defined]
