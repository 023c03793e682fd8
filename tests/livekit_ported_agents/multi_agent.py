"""A storyteller that hands the session from an intro agent to a story agent, ported from
LiveKit Agents.

Source: livekit/agents, ``examples/voice_agents/multi_agent.py`` (the ``WorkerOptions``
version). Structure kept: typed ``userdata`` (``StoryData``); ``IntroAgent.on_enter``
calls ``self.session.generate_reply()``; its tool stores the name and place and returns
``(StoryAgent(...), "Let's start the story!")``; ``StoryAgent`` overrides the LLM with a
realtime model and ``tts=None`` and greets in ``on_enter``; its ``story_finished`` tool
interrupts, awaits a goodbye ``generate_reply(..., allow_interruptions=False)`` and deletes
the room through ``get_current_job_context().api``; a ``prewarm`` loads the VAD into
``proc.userdata``; metrics are logged and collected with ``metrics.UsageCollector`` and the
usage is logged in a shutdown callback; ``session.start`` gets ``RoomInputOptions()`` and
``RoomOutputOptions(transcription_enabled=True)``; ``cli.run_app(WorkerOptions(...))``.

Changed beyond imports and providers: the code is in this project's words, instructions
paraphrased; ``load_dotenv()`` left out. Providers: ``openai.LLM``, ``deepgram.STT``,
``openai.TTS``, ``silero.VAD.load()`` and ``openai.realtime.RealtimeModel(voice="echo")`` are
the scripted fakes of ``fakes.py`` (the fake realtime model answers every request with
"hello from realtime").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

import fakes
from livekit import api

from agents_trio import (
    Agent,
    AgentSession,
    ChatContext,
    JobContext,
    JobProcess,
    RoomInputOptions,
    RoomOutputOptions,
    RunContext,
    WorkerOptions,
    cli,
    metrics,
)
from agents_trio.job import get_current_job_context
from agents_trio.llm import function_tool
from agents_trio.voice import MetricsCollectedEvent

logger = logging.getLogger("multi-agent")

COMMON = "You are Echo, a friendly storyteller talking with the user by voice."

#: what the shutdown callback logged (the tests read it)
USAGE: list[object] = []


@dataclass
class StoryData:
    name: Optional[str] = None
    location: Optional[str] = None


class IntroAgent(Agent):
    def __init__(self) -> None:
        super().__init__(
            instructions=f"{COMMON} Introduce yourself briefly, then ask for the user's name "
                         "and where they live so the story can be about them.",
        )

    async def on_enter(self) -> None:
        self.session.generate_reply()

    @function_tool
    async def information_gathered(self, context: RunContext[StoryData], name: str,
                                   location: str):
        """Called once the user told their name and where they live.

        Args:
            name: The user's name
            location: Where the user lives
        """
        context.userdata.name = name
        context.userdata.location = location
        return StoryAgent(name, location), "Let's start the story!"


class StoryAgent(Agent):
    def __init__(self, name: str, location: str, *,
                 chat_ctx: Optional[ChatContext] = None) -> None:
        super().__init__(
            instructions=f"{COMMON} Tell an interactive story about {name} from {location}; "
                         "end each part with a question.",
            llm=fakes.realtime(),
            tts=None,
            chat_ctx=chat_ctx,
        )

    async def on_enter(self) -> None:
        self.session.generate_reply()

    @function_tool
    async def story_finished(self, context: RunContext[StoryData]):
        """Called when the story is over and the user wants no more."""
        self.session.interrupt()
        await self.session.generate_reply(
            instructions=f"say goodbye to {context.userdata.name}", allow_interruptions=False
        )
        job_ctx = get_current_job_context()
        await job_ctx.api.room.delete_room(api.DeleteRoomRequest(room=job_ctx.room.name))


def prewarm(proc: JobProcess) -> None:
    proc.userdata["vad"] = fakes.vad()


async def entrypoint(ctx: JobContext) -> None:
    await ctx.connect()

    session = AgentSession[StoryData](
        vad=ctx.proc.userdata["vad"],
        llm=fakes.llm("multi_agent"),
        stt=fakes.stt(),
        tts=fakes.tts(),
        userdata=StoryData(),
    )

    usage_collector = metrics.UsageCollector()

    @session.on("metrics_collected")
    def _on_metrics_collected(ev: MetricsCollectedEvent) -> None:
        metrics.log_metrics(ev.metrics)
        usage_collector.collect(ev.metrics)

    async def log_usage() -> None:
        summary = usage_collector.get_summary()
        USAGE.append(summary)
        logger.info(f"Usage: {summary}")

    ctx.add_shutdown_callback(log_usage)

    await session.start(
        agent=IntroAgent(),
        room=ctx.room,
        room_input_options=RoomInputOptions(),
        room_output_options=RoomOutputOptions(transcription_enabled=True),
    )


fakes.SCRIPTS["multi_agent"] = [
    "Hi, I'm Echo, a storyteller. What's your name, and where are you from?",
    fakes.call("information_gathered", name="Ada", location="Lyon"),   # "I'm Ada, from Lyon."
    "Wonderful, Ada!",
]

if __name__ == "__main__":
    cli.run_app(WorkerOptions(entrypoint_fnc=entrypoint, prewarm_fnc=prewarm))
