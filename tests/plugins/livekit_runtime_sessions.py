"""Sessions of LiveKit Agents' own runtime (asyncio) on ``agents_trio.testing.livekit_fakes``:
run as a script by test_livekit_fakes.py (in its own process: the Trio tests import
trio-asyncio, which changes asyncio's loop factory process-wide). Prints a JSON report."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import Agent, AgentSession, RunContext, function_tool
from livekit.agents.voice import io

from agents_trio.testing.livekit_fakes import (
    FakePluginLLM,
    FakePluginSTT,
    FakePluginTTS,
    FakePluginVAD,
    tool_call,
)

RATE = 24000


class Weather(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You answer weather questions.")

    @function_tool
    async def lookup_weather(self, ctx: RunContext, city: str) -> str:
        """Look up the weather.

        Args:
            city: The city to look up
        """
        return f"sunny in {city}"


class Mic(io.AudioInput):
    """20 ms frames in real time: voice from 0.3 s to 1.3 s, then silence."""

    def __init__(self) -> None:
        super().__init__(label="mic")
        self.t = 0.0

    async def __anext__(self) -> rtc.AudioFrame:
        await asyncio.sleep(0.02)
        self.t += 0.02
        level = 800 if 0.3 <= self.t < 1.3 else 0
        samples = RATE // 50
        return rtc.AudioFrame(np.full(samples, level, dtype=np.int16).tobytes(), RATE, 1,
                              samples)


class Speaker(io.AudioOutput):
    """Plays every segment instantly; counts the audio it was given."""

    def __init__(self) -> None:
        super().__init__(label="speaker", capabilities=io.AudioOutputCapabilities(pause=False),
                         sample_rate=RATE)
        self.segment = 0.0
        self.total = 0.0

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if self.segment == 0.0:
            self.on_playback_started(created_at=time.time())
        self.segment += frame.duration
        self.total += frame.duration

    def flush(self) -> None:
        super().flush()
        self.on_playback_finished(playback_position=self.segment, interrupted=False)
        self.segment = 0.0

    def clear_buffer(self) -> None:
        pass


async def text_run_with_a_tool() -> dict[str, Any]:
    llm = FakePluginLLM({"What's the weather in Paris?": tool_call("lookup_weather",
                                                                   city="Paris"),
                         "sunny in Paris": "It is sunny in Paris."}, ttft=0.05)
    async with AgentSession(llm=llm, vad=None,
                            turn_handling={"turn_detection": "manual"}) as session:
        await session.start(Weather())
        result = await session.run(user_input="What's the weather in Paris?")
    described = {"function_call": lambda item: item.name,
                 "function_call_output": lambda item: item.output,
                 "message": lambda item: item.text_content}
    return {"events": [[e.type, described[e.type](e.item)] for e in result.events],
            "requests": len(llm.requests)}


async def voice_turn() -> dict[str, Any]:
    stt = FakePluginSTT(["what's the weather"])
    llm = FakePluginLLM({"what's the weather": "Sunny all day."}, ttft=0.1)
    tts = FakePluginTTS(ttfb=0.05, seconds_per_char=0.01)
    vad = FakePluginVAD(min_silence=0.3)
    speaker = Speaker()
    async with AgentSession(vad=vad, stt=stt, llm=llm, tts=tts,
                            turn_handling={"turn_detection": "vad",
                                           "endpointing": {"min_delay": 0.2}}) as session:
        session.input.audio = Mic()
        session.output.audio = speaker
        await session.start(Agent(instructions="Answer briefly."))
        for _ in range(200):
            await asyncio.sleep(0.05)
            if tts.texts and speaker.total and session.agent_state == "listening":
                break
        history = [[m.role, m.text_content] for m in session.history.messages()]
    return {"utterances": stt.utterances, "tts_texts": tts.texts, "history": history,
            "vad_frames": vad.frames, "audio_seconds": round(speaker.total, 2)}


async def main() -> None:
    print(json.dumps({"text": await text_run_with_a_tool(), "voice": await voice_turn()}))


if __name__ == "__main__":
    asyncio.run(main())
