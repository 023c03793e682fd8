"""An agent whose LLM answers in JSON, with overridden ``llm_node``, ``tts_node`` and
``transcription_node``, ported from LiveKit Agents.

Source: livekit/agents, ``examples/voice_agents/structured_output.py``. Structure kept: a
``ResponseEmotion`` TypedDict; ``process_structured_output`` parses the growing JSON text
with ``pydantic_core.from_json(..., allow_partial="trailing-strings")`` and yields the new
part of ``response``; ``llm_node`` calls ``self.llm.chat(chat_ctx=, tools=, tool_choice=)``
itself (``async with ... as stream``) and yields its chunks; ``tts_node`` returns
``super().tts_node(process_structured_output(text, callback=...), model_settings)`` and the
callback reads ``voice_instructions``; ``transcription_node`` yields the parsed deltas.

Changed beyond imports and providers: the code is in this project's words, instructions
paraphrased; the ``AgentServer`` entrypoint replaces ``WorkerOptions``, and the session has no
``turn_detection`` (``turn_detector.EOUModel()`` is a model file download); ``llm.chat()``
gets no ``response_format=ResponseEmotion`` (an argument of the OpenAI plugin only, not of
LiveKit's ``LLM.chat``: the scripted fake answers JSON by itself); the TTS callback records
the instructions instead of ``openai.TTS.update_options(instructions=...)`` (no such option
on the fake). Providers: ``openai.STT/LLM/TTS`` and ``silero.VAD`` are the fakes of
``fakes.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Annotated, Callable, Optional

import fakes
from pydantic import Field
from pydantic_core import from_json
from typing_extensions import TypedDict

from agents_trio import (
    NOT_GIVEN,
    Agent,
    AgentServer,
    AgentSession,
    ChatContext,
    FunctionTool,
    JobContext,
    ModelSettings,
    cli,
)

#: the voice instructions the TTS callback saw (the tests read them)
VOICE_INSTRUCTIONS: list[str] = []


class ResponseEmotion(TypedDict):
    voice_instructions: Annotated[
        str, Field(..., description="A short directive on tone, emotion and speed for the TTS")
    ]
    response: str


async def process_structured_output(
    text: AsyncIterable[str],
    callback: Optional[Callable[[ResponseEmotion], None]] = None,
) -> AsyncIterable[str]:
    said = ""
    so_far = ""
    async for chunk in text:
        so_far += chunk
        try:
            parsed: ResponseEmotion = from_json(so_far, allow_partial="trailing-strings")
        except ValueError:
            continue
        if callback:
            callback(parsed)
        if not parsed.get("response"):
            continue
        delta = parsed["response"][len(said):]
        if delta:
            yield delta
        said = parsed["response"]


class MyAgent(Agent):
    def __init__(self) -> None:
        super().__init__(
            instructions="You are Echo, a very expressive voice assistant: match your tone "
                         "to the conversation and keep answers short.",
            stt=fakes.stt(),
            llm=fakes.llm("structured_output"),
            tts=fakes.tts(),
        )

    async def llm_node(self, chat_ctx: ChatContext, tools: list[FunctionTool],
                       model_settings: ModelSettings):
        llm = self.llm
        tool_choice = model_settings.tool_choice if model_settings else NOT_GIVEN
        async with llm.chat(chat_ctx=chat_ctx, tools=tools, tool_choice=tool_choice) as stream:
            async for chunk in stream:
                yield chunk

    async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings):
        updated = False

        def on_parsed(resp: ResponseEmotion) -> None:
            nonlocal updated
            if resp.get("voice_instructions") and resp.get("response") and not updated:
                updated = True
                VOICE_INSTRUCTIONS.append(resp["voice_instructions"])

        return super().tts_node(process_structured_output(text, callback=on_parsed),
                                model_settings)

    async def transcription_node(self, text: AsyncIterable[str],
                                 model_settings: ModelSettings):
        async for delta in process_structured_output(text):
            yield delta


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    await ctx.connect()
    session = AgentSession(vad=fakes.vad())
    await session.start(agent=MyAgent(), room=ctx.room)


fakes.SCRIPTS["structured_output"] = [
    '{"voice_instructions": "cheerful and quick", "response": "Hello there! Nice to meet you."}',
    '{"voice_instructions": "calm", "response": "It is a quiet evening."}',
]

if __name__ == "__main__":
    cli.run_app(server)
