"""A weather agent written in LiveKit Agents' idioms: only the imports name agents_trio.

    python tests/data/livekit_style_agent.py console --text

With ``AGENT_MODELS=fake`` (what the tests set) the models are agents_trio's Trio fakes with
a script of answers; otherwise the LiveKit plugins (OpenAI, Deepgram, Cartesia, Silero)
through ``agents_trio.plugins.adapt``.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from agents_trio import (Agent, AgentServer, AgentSession, JobContext, JobProcess, RunContext,
                         cli, function_tool, get_job_context, room_io)

logger = logging.getLogger("weather-agent")


class WeatherAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a weather assistant. Answer briefly.")

    async def on_enter(self) -> None:
        self.session.say("Hello! Ask me about the weather.")

    @function_tool
    async def get_weather(self, context: RunContext, location: str) -> str:
        """Look up the weather in a city.

        Args:
            location: The city
        """
        room = get_job_context().room.name
        return f"It is sunny and 22 degrees in {location} (asked from room {room})."


def fake_models(proc: JobProcess) -> dict[str, Any]:
    from agents_trio.models import FunctionToolCall
    from agents_trio.testing import FakeLLM, FakeVAD
    from agents_trio.testing.actions import FakeLLMResponse

    def answer(said: str, reply: str, **kwargs: Any) -> FakeLLMResponse:
        return FakeLLMResponse(input=said, content=reply, ttft=0.01, duration=0.05, **kwargs)

    weather_call = FunctionToolCall(name="get_weather", arguments='{"location": "Paris"}',
                                    call_id="call_paris")
    llm = FakeLLM([
        answer("Hi there", "Hi! Which city?"),
        answer("What's the weather in Paris?", "Let me check.", tool_calls=[weather_call]),
        answer("It is sunny and 22 degrees in Paris (asked from room console).",
               "Sunny and 22 degrees in Paris."),
        answer("Thanks, bye", "Goodbye!"),
    ])
    proc.userdata["vad"] = FakeVAD([])
    return {"llm": llm}


def real_models(proc: JobProcess) -> dict[str, Any]:  # pragma: no cover - needs provider keys
    from livekit.plugins import cartesia, deepgram, openai, silero

    from agents_trio.plugins import adapt

    proc.userdata["vad"] = adapt(silero.VAD.load())
    return {"llm": adapt(openai.LLM(model="gpt-4.1-mini")), "stt": adapt(deepgram.STT()),
            "tts": adapt(cartesia.TTS())}


def prewarm(proc: JobProcess) -> None:
    models = fake_models if os.environ.get("AGENT_MODELS") == "fake" else real_models
    proc.userdata["models"] = models(proc)
    proc.userdata["prewarmed_in"] = proc.pid


server = AgentServer()
server.setup_fnc = prewarm


@server.rtc_session(agent_name="weather")
async def entrypoint(ctx: JobContext) -> None:
    async def log_shutdown(reason: str) -> None:
        print(f"shutdown callback: reason={reason} "
              f"prewarmed_here={ctx.proc.userdata['prewarmed_in'] == os.getpid()}",
              file=sys.stderr, flush=True)

    ctx.add_shutdown_callback(log_shutdown)
    session = AgentSession(vad=ctx.proc.userdata["vad"], **ctx.proc.userdata["models"])
    await session.start(agent=WeatherAgent(), room=ctx.room,
                        room_options=room_io.RoomOptions(close_on_disconnect=True))
    await ctx.connect()


if __name__ == "__main__":
    cli.run_app(server)
