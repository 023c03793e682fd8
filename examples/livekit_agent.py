"""A voice agent in a LiveKit room, on real providers when their keys are set, fakes otherwise.

    pip install 'agents-trio[livekit-plugins]' livekit-plugins-openai livekit-plugins-deepgram \\
        livekit-plugins-cartesia livekit-plugins-silero          # the providers you want
    export LIVEKIT_URL=wss://<project>.livekit.cloud LIVEKIT_API_KEY=... LIVEKIT_API_SECRET=...
    export OPENAI_API_KEY=... DEEPGRAM_API_KEY=... CARTESIA_API_KEY=...

    python -m agents_trio connect --room demo examples/livekit_agent.py     # join one room
    python -m agents_trio worker examples/livekit_agent.py dev              # serve dispatch

Then open the room in the LiveKit Agents Playground (https://agents-playground.livekit.io)
and talk, or type in its chat. Without provider keys the agent still joins: it answers chat
messages by echoing them and "speaks" with short beeps, so the room plumbing can be tried
with LiveKit credentials alone.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import numpy as np
import trio
from livekit import rtc

from agents_trio import (
    Agent,
    AgentSession,
    ChatChunk,
    ChatContext,
    ChatMessage,
    RunContext,
    function_tool,
)
from agents_trio.job import JobContext

logger = logging.getLogger("livekit_agent")


class Assistant(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=(
            "You are a friendly voice assistant running on agents_trio. Keep answers short "
            "and conversational; no markdown."))

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="Greet the user and offer your help.")

    @function_tool
    async def current_time(self, ctx: RunContext) -> str:
        """Tell the current time."""
        return datetime.now().strftime("%H:%M")


# -- providers ------------------------------------------------------------------------------
def _plugin(name: str) -> Any:
    try:
        return importlib.import_module(f"livekit.plugins.{name}")
    except ImportError:
        return None


def build_models(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The session's models: a LiveKit plugin per role whose key (and package) is present,
    else a Trio fake. Returns the ``AgentSession`` keyword arguments."""
    env = dict(os.environ if env is None else env)
    from agents_trio.plugins import adapt

    silero = _plugin("silero")
    vad = silero.VAD.load() if silero else None
    openai, deepgram = _plugin("openai"), _plugin("deepgram")
    cartesia, elevenlabs = _plugin("cartesia"), _plugin("elevenlabs")
    google = _plugin("google")

    stt: Any = None
    if deepgram and env.get("DEEPGRAM_API_KEY"):
        stt = deepgram.STT(model="nova-3")
    elif openai and env.get("OPENAI_API_KEY") and vad is not None:
        stt = openai.STT()  # not streaming: segmented by the VAD

    llm: Any = EchoLLM()
    if openai and env.get("OPENAI_API_KEY"):
        llm = openai.LLM(model="gpt-4o-mini")
    elif google and env.get("GOOGLE_API_KEY"):
        llm = google.LLM()

    tts: Any = BeepTTS()
    if cartesia and env.get("CARTESIA_API_KEY"):
        tts = cartesia.TTS()
    elif elevenlabs and env.get("ELEVEN_API_KEY"):
        tts = elevenlabs.TTS()
    elif openai and env.get("OPENAI_API_KEY"):
        tts = openai.TTS()

    return {"vad": adapt(vad), "stt": adapt(stt, vad=vad), "llm": adapt(llm),
            "tts": adapt(tts)}


async def entrypoint(ctx: JobContext) -> None:
    models = build_models()
    logger.info("models: %s", {role: type(m).__name__ for role, m in models.items()})
    session = AgentSession(**models)
    reason = await ctx.run_session(session, Assistant())
    logger.info("session closed: %s", reason)


# -- fakes ----------------------------------------------------------------------------------
class EchoLLM:
    """A Trio LLM that echoes the last user message (greets when there is none)."""

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
                   tool_choice: Any = None) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        users = [m for m in chat_ctx.items if isinstance(m, ChatMessage) and m.role == "user"]
        text = (f"You said: {users[-1].text_content}." if users else
                "Hello! I am an agents_trio demo agent. Set provider keys to talk for real, "
                "or type in the chat.")
        yield self._words(text)

    async def _words(self, text: str) -> AsyncIterator[ChatChunk]:
        for i, word in enumerate(text.split(" ")):
            await trio.sleep(0.02)
            yield ChatChunk(content=word if i == 0 else " " + word)


class BeepTTS:
    """A Trio TTS that plays a soft 60 ms beep per word."""

    sample_rate = 24000
    num_channels = 1

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]) -> AsyncIterator[AsyncIterator[Any]]:
        yield self._beeps(text)

    async def _beeps(self, text: AsyncIterable[str]) -> AsyncIterator[rtc.AudioFrame]:
        words = len("".join([t async for t in text]).split())
        rate = self.sample_rate
        t = np.arange(int(0.06 * rate)) / rate
        beep = (np.sin(2 * math.pi * 660 * t) * 3000).astype(np.int16)
        gap = np.zeros(int(0.09 * rate), dtype=np.int16)
        for _ in range(words):
            data = np.concatenate([beep, gap])
            yield rtc.AudioFrame(data.tobytes(), rate, 1, data.size)
