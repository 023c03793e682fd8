"""The demo conversation in real time on real models, offline.

    python -m agents_trio demo --voice --out DIR   # records DIR/{user,agent,conversation}.wav
    python -m agents_trio demo --voice             # plays it through the speaker

The user's lines are synthesized with espeak-ng and played into the session as a microphone
would deliver them (20 ms frames at wall-clock pace); Silero VAD (LiveKit's plugin through
``adapt()``), PocketSphinx (restricted to the script's phrases), a rule-based LLM with a tool
call and espeak-ng TTS do the rest. The user asks for the weather (a tool call), asks for a
story and interrupts it ("Wait, stop." — a barge-in: the agent's voice is cleared), then says
goodbye.

All times are on one clock: t = 0 is the first sample of the WAVs. The wall clock drives this
demo (that is its point); the runtime reads it through ``trio.current_time()`` as always.

Needs ``pip install -e '.[voice]'`` and ``apt-get install espeak-ng``; says so when missing.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import trio

from .chat import ChatContext, ChatMessage, FunctionCallOutput
from .demo import STORY, OrderedPrinter, WeatherAgent
from .io.wav import (WavInput, WavOutput, frame_samples, mix_stereo, resample_pcm,
                     speech_bounds, write_wav)
from .events import (AgentStateChangedEvent, ConversationItemAddedEvent,
                     FunctionToolsExecutedEvent, UserInputTranscribedEvent)
from .io.local_audio import SoundPlayer
from .models import ChatChunk, FunctionToolCall, ToolChoice
from .session import AgentSession

RATE = 16000                   # the WAVs' rate: the input's and the output's
USER_VOICE = "en-us+f3"
AGENT_VOICE = "en-us"
WEATHER = "What is the weather in Lisbon?"
STORY_REQUEST = "Tell me a story."
BARGE_IN = "Wait, stop."
GOODBYE = "Thank you, goodbye."
LINES = [WEATHER, STORY_REQUEST, BARGE_IN, GOODBYE]
BARGE_IN_AFTER = 2.5           # seconds into the story
TURN_TIMEOUT = 12.0            # at most this long waiting for the agent after a line
QUIET = 0.8                    # the agent has listened this long: the user speaks again
MONITOR_LAG = 0.3              # the speaker plays the recording this far behind


# -- what is missing ------------------------------------------------------------------------


def missing_dependencies() -> list[str]:
    """What the voice demo needs and does not find, each with how to install it."""
    missing = []
    if shutil.which("espeak-ng") is None:
        missing.append("espeak-ng (the TTS): apt-get install espeak-ng")
    python = {"pocketsphinx": "PocketSphinx (the STT)",
              "livekit.plugins.silero": "livekit-plugins-silero (the VAD)",
              "livekit.agents": "livekit-agents (the plugin bridge)"}
    for module, what in python.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(f"{what}: pip install -e '.[voice]'")
    return missing


# -- the agent's brain ----------------------------------------------------------------------


class RuleLLM:
    """A rule-based LLM: answers the demo's lines by keyword, calls ``get_weather`` for a
    weather question and reads its result back. Streams its answer word by word."""

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
                   tool_choice: ToolChoice | None = None
                   ) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        """One answer to the last item of ``chat_ctx``, streamed word by word.

        Cancellation: it holds nothing; a cancelled stream stops mid-answer (the words
        already streamed are the caller's).
        """
        yield self._answer(chat_ctx, tool_choice)

    async def _answer(self, chat_ctx: ChatContext, tool_choice: ToolChoice | None
                      ) -> AsyncIterator[ChatChunk]:
        items = chat_ctx.items
        last = items[-1] if items else None
        if isinstance(last, FunctionCallOutput):
            async for chunk in self._words(f"{last.output} Enjoy!"):
                yield chunk
            return
        said = (last.text_content or "").lower() if isinstance(last, ChatMessage) else ""
        if "weather" in said and tool_choice != "none":
            match = re.search(r"\bin ([a-z]+)", said)
            city = (match.group(1) if match else "lisbon").title()
            async for chunk in self._words("Let me check that for you."):
                yield chunk
            yield ChatChunk(tool_calls=[FunctionToolCall(
                name="get_weather", arguments=json.dumps({"location": city}),
                call_id=f"call_{len(items)}")])
            return
        if "story" in said:
            answer = STORY
        elif "stop" in said or "wait" in said:
            answer = "Sure, I'll stop. Anything else?"
        elif "goodbye" in said or "thank" in said:
            answer = "You're welcome. Goodbye!"
        else:
            answer = "Sorry, I did not catch that."
        async for chunk in self._words(answer):
            yield chunk

    @staticmethod
    async def _words(text: str) -> AsyncIterator[ChatChunk]:
        for word in re.findall(r"\S+\s*", text):
            await trio.sleep(0)
            yield ChatChunk(content=word)


# -- the run --------------------------------------------------------------------------------


@dataclass
class UserTurn:
    line: str
    clip_start: float
    clip_end: float
    start: float
    end: float


class VoiceDemo:
    """One run of the voice demo: the session, the scripted user, and what they recorded."""

    user: WavInput           # the user's side (set by ``run``)
    agent: WavOutput         # the agent's side
    duration: float          # seconds recorded

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.user_turns: list[UserTurn] = []
        self.transcripts: list[tuple[float, str]] = []
        self.assistant_items: list[tuple[float, str, bool]] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.agent_state = "initializing"
        self.state_changed_at = 0.0
        self.origin = 0.0

    # events (Trio time -> seconds from the origin)
    def _t(self, at: float) -> float:
        return round(at - self.origin, 3)

    def _on_state(self, ev: AgentStateChangedEvent) -> None:
        self.agent_state = ev.new_state
        self.state_changed_at = trio.current_time()

    def _on_transcript(self, ev: UserInputTranscribedEvent) -> None:
        if ev.is_final and ev.transcript.strip():
            self.transcripts.append((ev.created_at - self.origin, ev.transcript))

    def _on_item(self, ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if getattr(item, "role", None) == "assistant" and item.type == "message":
            self.assistant_items.append((ev.created_at - self.origin, item.text_content or "",
                                         bool(item.interrupted)))

    def _on_tools(self, ev: FunctionToolsExecutedEvent) -> None:
        for call, _ in ev.zipped():
            try:
                arguments = json.loads(call.arguments)
            except ValueError:
                arguments = call.arguments
            self.tool_calls.append({"t": self._t(call.created_at), "name": call.name,
                                    "arguments": arguments})

    # the scripted user
    async def say(self, clips: dict[str, np.ndarray], line: str, printer: OrderedPrinter
                  ) -> UserTurn:
        """Play ``line``'s clip on the user's input. Not a checkpoint: the clip is queued at
        once, so a cancellation never leaves it half-queued."""
        clip = clips[line]
        clip_start, clip_end = self.user.play(clip, RATE)
        bounds = speech_bounds(clip, RATE)
        start = clip_start + (bounds[0][0] if bounds else 0.0)
        end = clip_start + (bounds[-1][1] if bounds else clip_end - clip_start)
        turn = UserTurn(line, clip_start, clip_end, round(start, 3), round(end, 3))
        self.user_turns.append(turn)
        printer.add(start, "mic", f"plays {line!r} ({end - start:.2f}s of speech)")
        return turn

    async def wait_clip_played(self, turn: UserTurn) -> None:
        """Until ``turn``'s clip has played. Cancellation: a checkpoint; nothing changes."""
        await trio.sleep_until(self.origin + turn.clip_end)

    async def wait_listening(self, since: float) -> None:
        """Until the agent has been listening for ``QUIET`` seconds after changing state
        since ``since`` (Trio time); at most ``TURN_TIMEOUT``.

        Cancellation: a checkpoint; nothing changes.
        """
        with trio.move_on_after(TURN_TIMEOUT):
            while True:
                now = trio.current_time()
                if (self.agent_state == "listening" and self.state_changed_at > since
                        and now - self.state_changed_at >= QUIET):
                    return
                await trio.sleep(0.05)

    async def wait_speaking(self, since: float) -> None:
        """Until the agent starts speaking after ``since`` (Trio time); at most
        ``TURN_TIMEOUT``. Cancellation: a checkpoint; nothing changes."""
        with trio.move_on_after(TURN_TIMEOUT):
            while not (self.agent_state == "speaking" and self.state_changed_at > since):
                await trio.sleep(0.02)

    async def script(self, clips: dict[str, np.ndarray], printer: OrderedPrinter) -> None:
        """The scripted user's four lines, each after the agent's previous answer.

        Cancellation: the user stops where it is; a clip already queued plays on.
        """
        await self.wait_listening(self.origin)                 # the greeting has played
        turn = await self.say(clips, WEATHER, printer)         # a tool call
        await self.wait_clip_played(turn)
        await self.wait_listening(trio.current_time())
        turn = await self.say(clips, STORY_REQUEST, printer)   # a long answer ...
        await self.wait_clip_played(turn)
        await self.wait_speaking(trio.current_time())
        await trio.sleep(BARGE_IN_AFTER)
        turn = await self.say(clips, BARGE_IN, printer)        # ... interrupted
        await self.wait_clip_played(turn)
        await self.wait_listening(trio.current_time())
        turn = await self.say(clips, GOODBYE, printer)
        await self.wait_clip_played(turn)
        await self.wait_listening(trio.current_time())

    async def monitor(self, player: SoundPlayer) -> None:
        """Plays the recording so far (user left, agent right) ``MONITOR_LAG`` behind, until
        cancelled (the way it stops); what it wrote to ``player`` plays out."""
        played = 0
        while True:
            await trio.sleep(0.05)
            upto = int((trio.current_time() - self.origin - MONITOR_LAG) * RATE)
            if upto <= played:
                continue
            user = self.user.recording()[played:upto]
            agent = self.agent.recording(until=upto / RATE)[played:upto]
            player.write(mix_stereo(np.pad(user, (0, upto - played - len(user))), agent))
            played = upto

    async def run(self, player: SoundPlayer | None = None) -> None:
        """The whole demo: synthesize the user's lines, run the session on the script, and
        record both sides (monitored on ``player`` if given).

        Cancellation: the session, the bridge and the printers end with their blocks (a
        running espeak-ng is killed); the recordings keep what they got and ``duration`` is
        not set.
        """
        from . import open_bridge
        from .offline import EspeakTTS, SphinxSTT
        from .plugins import adapt

        user_tts = EspeakTTS(voice=USER_VOICE, speed=160)
        clips: dict[str, np.ndarray] = {}
        for line in LINES:
            frame = await user_tts.synthesize(line)
            clips[line] = resample_pcm(frame_samples(frame), frame.sample_rate, RATE)

        from livekit.plugins import silero

        async with open_bridge():
            vad = adapt(await trio.to_thread.run_sync(silero.VAD.load))
            session = AgentSession(stt=SphinxSTT(phrases=LINES), vad=vad, llm=RuleLLM(),
                                   tts=EspeakTTS(voice=AGENT_VOICE), aec_warmup_duration=None)
            self.origin = trio.current_time()
            self.user = WavInput(sample_rate=RATE, keep_open=True, origin=self.origin)
            self.agent = WavOutput(sample_rate=RATE, origin=self.origin)
            session.input.audio = self.user
            session.output.audio = self.agent
            printer = OrderedPrinter(session, self.out)
            printer.t0 = self.origin
            session.on("agent_state_changed", self._on_state)
            session.on("user_input_transcribed", self._on_transcript)
            session.on("conversation_item_added", self._on_item)
            session.on("function_tools_executed", self._on_tools)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(printer.run)
                if player is not None:
                    nursery.start_soon(self.monitor, player)
                async with session:
                    await session.start(WeatherAgent())
                    await self.script(clips, printer)
                    await session.aclose()
                self.user.close()
                if player is not None:
                    await trio.sleep(MONITOR_LAG + 0.1)
                nursery.cancel_scope.cancel()
            printer.release()
        self.duration = max(self.user.position,
                            max((s.end for s in self.agent.segments), default=0.0)) + 0.3

    # results
    def timeline(self) -> dict[str, Any]:
        turns: list[dict[str, Any]] = []
        for i, turn in enumerate(self.user_turns):
            upto = (self.user_turns[i + 1].clip_start if i + 1 < len(self.user_turns)
                    else math.inf)
            heard = [text for t, text in self.transcripts if turn.clip_start <= t < upto]
            turns.append({"start": turn.start, "end": turn.end, "transcript": " ".join(heard)})
        replies: list[dict[str, Any]] = []
        items = list(self.assistant_items)
        for seg in self.agent.segments:
            text = ""
            for k, (t, item_text, _) in enumerate(items):
                if t >= seg.end - 0.05:
                    text = item_text
                    del items[k]
                    break
            replies.append({"start": round(seg.start, 3), "end": round(seg.end, 3),
                            "text": text, "interrupted": seg.interrupted,
                            "cleared_at": (round(seg.cleared_at, 3)
                                           if seg.cleared_at is not None else None)})
        to_audio: list[float] = []
        for entry in turns:
            after = [r["start"] for r in replies if r["start"] >= entry["end"]]
            if after:
                to_audio.append(round(after[0] - entry["end"], 3))
        to_clear: list[float] = []
        for reply in replies:
            if reply["cleared_at"] is None:
                continue
            barge = [t["start"] for t in turns if reply["start"] <= t["start"]
                     <= reply["cleared_at"]]
            if barge:
                to_clear.append(round(reply["cleared_at"] - barge[-1], 3))
        return {"user_turns": turns, "agent_replies": replies,
                "tool_calls": sorted(self.tool_calls, key=lambda c: c["t"]),
                "metrics": {"end_of_speech_to_first_audio_s": to_audio,
                            "barge_in_to_clear_s": to_clear}}

    def write(self, out_dir: Path) -> dict[str, Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        n = int(math.ceil(self.duration * RATE))
        user = np.pad(self.user.recording(), (0, n))[:n]
        agent = np.pad(self.agent.recording(), (0, n))[:n]
        paths = {name: out_dir / f"{name}.wav" for name in ("user", "agent", "conversation")}
        write_wav(paths["user"], user, RATE)
        write_wav(paths["agent"], agent, RATE)
        write_wav(paths["conversation"], mix_stereo(user, agent), RATE, 2)
        paths["timeline"] = out_dir / "timeline.json"
        paths["timeline"].write_text(json.dumps(self.timeline(), indent=2) + "\n")
        return paths


def main(*, out_dir: str | Path | None, out: TextIO) -> int:
    """Run the voice demo; 0 when it ran, 1 when something is missing (it says what)."""
    from .io.local_audio import LocalAudioUnavailable, device_available, import_sounddevice

    missing = missing_dependencies()
    if missing:
        print("agents_trio demo --voice needs:", file=out)
        for m in missing:
            print(f"  - {m}", file=out)
        return 1
    player = None
    if out_dir is None:
        try:
            import_sounddevice()
        except LocalAudioUnavailable as e:
            print(f"No speaker: {e}. Or record the conversation with --out DIR.", file=out)
        else:
            if device_available("output"):
                player = SoundPlayer(sample_rate=RATE, channels=2)
                player.start()
            else:
                print("No audio output device found: nothing will be heard. Record the "
                      "conversation with --out DIR.", file=out)
    print("agents_trio demo --voice: a conversation in real time on real models (espeak-ng, "
          "Silero VAD, PocketSphinx; no keys, no network)", file=out)
    print("   time   who      what", file=out, flush=True)
    demo = VoiceDemo(out)

    async def run() -> float:
        """The demo; returns how long it took (Trio's default clock is the real one)."""
        began = trio.current_time()
        try:
            await demo.run(player)
        finally:
            if player is not None:
                await player.aclose()
        return trio.current_time() - began

    took = trio.run(run)
    timeline = demo.timeline()
    m = timeline["metrics"]
    print(f"end of speech -> first audio: {m['end_of_speech_to_first_audio_s']} s; "
          f"barge-in -> cleared: {m['barge_in_to_clear_s']} s", file=out)
    if out_dir is not None:
        paths = demo.write(Path(out_dir))
        print("wrote " + ", ".join(str(p) for p in paths.values()), file=out)
    print(f"finished in {took:.1f} s", file=out)
    return 0
