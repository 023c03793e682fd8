"""Audio recognition: user audio → VAD and STT → user state, transcripts, end of turn.

It belongs to the session, not to an activity: a handoff or an AgentTask does not tear the
pipeline down, and every decision is delivered to whichever activity is current through
``RecognitionHooks`` (the session routes them). Each input frame is pushed to the VAD and STT
streams directly, with no channel hop in between.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import AsyncExitStack, aclosing
from typing import Any, Protocol

import msgspec
import trio

from ._errors import APIError
from .models import STT, VAD, SpeechEvent, SpeechEventType, VADEvent, VADEventType
from .nurseries import LatestSlot
from .options import TurnHandling

logger = logging.getLogger("agents_trio")


SttNode = Callable[[AsyncIterable[Any]], AsyncIterator[SpeechEvent]]


class _ChannelFeed:
    """Looks like an STT stream to the pump; feeds an overridden ``stt_node``."""

    def __init__(self, send: trio.MemorySendChannel[Any]) -> None:
        self._send = send

    def push_frame(self, frame: Any) -> None:
        self._send.send_nowait(frame)

    def end_input(self) -> None:
        self._send.close()


STT_RETRY_DELAY = 0.5


class _SttFeed:
    """Where the pump pushes frames for the STT: the current stream, if one is open (frames
    arriving while a failed stream is being replaced are dropped)."""

    def __init__(self) -> None:
        self.stream: Any = None
        self.ended = False

    def push_frame(self, frame: Any) -> None:
        if self.stream is not None:
            self.stream.push_frame(frame)

    def end_input(self) -> None:
        self.ended = True
        if self.stream is not None:
            self.stream.end_input()


class EndOfTurnInfo(msgspec.Struct, kw_only=True):
    new_transcript: str
    transcript_confidence: float = 1.0
    started_speaking_at: float | None = None
    stopped_speaking_at: float | None = None
    transcription_delay: float = 0.0
    end_of_turn_delay: float = 0.0


class RecognitionHooks(Protocol):
    def turn_options(self) -> TurnHandling: ...
    def on_start_of_speech(self, ev: VADEvent | None, started_at: float) -> None: ...
    def on_vad_inference(self, ev: VADEvent) -> None: ...
    def on_end_of_speech(self, ev: VADEvent | None, stopped_at: float) -> None: ...
    def on_interim_transcript(self, ev: SpeechEvent) -> None: ...
    def on_final_transcript(self, ev: SpeechEvent) -> None: ...
    def on_end_of_turn(self, info: EndOfTurnInfo) -> bool: ...
    def on_recognition_error(self, error: BaseException, source: Any) -> None: ...


class AudioRecognition:
    """Runs the VAD and STT streams over the user's audio and decides end of turn.

    Args:
        hooks: Receives every decision (the session).
        vad: Voice activity detection, or None.
        stt: Speech to text, or None.
        turn_detection: ``"vad"``, ``"stt"``, ``"manual"`` or None (VAD when there is one).
    """

    def __init__(self, hooks: RecognitionHooks, *, vad: VAD | None, stt: STT | None,
                 turn_detection: str | None, stt_node: SttNode | None = None) -> None:
        self._hooks = hooks
        self._vad = vad
        self._stt = stt
        self._stt_node = stt_node
        # where the user's frames also go (a realtime model's session), or None
        self.audio_sink: Callable[[Any], None] | None = None
        if turn_detection is None:
            turn_detection = "vad" if vad is not None else ("stt" if stt is not None else "manual")
        self.turn_detection = turn_detection
        self._finals: list[str] = []
        self._interim = ""
        self._confidences: list[float] = []
        self._user_speaking = False
        self._speech_started_at: float | None = None
        self._last_speaking_time: float | None = None
        self._last_final_time: float | None = None
        self._eot_slot: LatestSlot | None = None

    # -- state ---------------------------------------------------------------------------------
    @property
    def transcript(self) -> str:
        """The final transcripts of the open user turn, joined."""
        return " ".join(self._finals)

    @property
    def current_transcript(self) -> str:
        """Finals plus the latest interim transcript."""
        return " ".join([*self._finals, self._interim]).strip()

    @property
    def user_speaking(self) -> bool:
        return self._user_speaking

    @property
    def end_of_turn_pending(self) -> bool:
        """True while an end-of-turn decision is open (derived from the bounce task)."""
        return self._eot_slot is not None and self._eot_slot.occupied

    @property
    def user_speech_duration(self) -> float:
        if self._speech_started_at is None:
            return 0.0
        return trio.current_time() - self._speech_started_at

    def clear_user_turn(self) -> None:
        self._finals.clear()
        self._interim = ""
        self._confidences.clear()
        if self._eot_slot is not None:
            self._eot_slot.cancel()

    # -- running -------------------------------------------------------------------------------
    async def run(self, audio: AsyncIterable[Any], *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until the audio input ends or the caller's scope is cancelled.

        Cancellation: cancelling the caller stops the streams; nothing is committed.
        """
        async with AsyncExitStack() as stack:
            vad_stream = await stack.enter_async_context(self._vad.stream()) if self._vad else None
            stt_stream: Any = None
            async with trio.open_nursery() as nursery:
                self._eot_slot = LatestSlot(nursery)
                if vad_stream is not None:
                    nursery.start_soon(self._consume_vad, vad_stream)
                if self._stt is not None and self._stt_node is None:
                    stt_stream = _SttFeed()
                    await nursery.start(self._run_stt, stt_stream)
                elif self._stt is not None and self._stt_node is not None:
                    # an overridden stt_node: frames reach it through a channel (one hop)
                    frames_send, frames_recv = trio.open_memory_channel[Any](math.inf)
                    stt_stream = _ChannelFeed(frames_send)
                    nursery.start_soon(self._consume_stt_node, frames_recv)
                task_status.started()
                await self._pump(audio, vad_stream, stt_stream)

    async def _pump(self, audio: AsyncIterable[Any], vad_stream: Any, stt_stream: Any) -> None:
        async for frame in audio:
            if self.audio_sink is not None:
                self.audio_sink(frame)
            if vad_stream is not None:
                vad_stream.push_frame(frame)
            if stt_stream is not None:
                stt_stream.push_frame(frame)
        if vad_stream is not None:
            vad_stream.end_input()
        if stt_stream is not None:
            stt_stream.end_input()

    async def _consume_vad(self, stream: Any) -> None:
        try:
            async for ev in stream:
                self._on_vad_event(ev)
        except APIError as e:
            self._hooks.on_recognition_error(e, self._vad)

    async def _consume_stt_node(self, frames: trio.MemoryReceiveChannel[Any]) -> None:
        assert self._stt_node is not None
        try:
            async with aclosing(self._stt_node(frames)) as events:
                async for ev in events:
                    self._on_stt_event(ev)
        except APIError as e:
            self._hooks.on_recognition_error(e, self._stt)

    async def _run_stt(self, feed: _SttFeed, *,
                       task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep an STT stream open; after a provider error (``APIError``) open a new one after
        0.5 s (reference §3.1); any other error stops recognition by STT."""
        assert self._stt is not None
        started = False
        while not feed.ended:
            try:
                async with self._stt.stream() as stream:
                    feed.stream = stream
                    if not started:
                        task_status.started()
                        started = True
                    async for ev in stream:
                        self._on_stt_event(ev)
                    return
            except APIError as e:
                self._hooks.on_recognition_error(e, self._stt)
            except Exception as e:
                logger.exception("the STT stream failed; speech recognition stops")
                self._hooks.on_recognition_error(e, self._stt)
                return
            finally:
                feed.stream = None
                if not started:
                    task_status.started()
                    started = True
            await trio.sleep(STT_RETRY_DELAY)

    # -- decisions -----------------------------------------------------------------------------
    def _on_vad_event(self, ev: VADEvent) -> None:
        now = trio.current_time()
        if ev.type is VADEventType.START_OF_SPEECH:
            started_at = now - ev.speech_duration - ev.inference_duration
            self._user_speaking = True
            self._speech_started_at = started_at
            if self._eot_slot is not None:
                self._eot_slot.cancel()
            self._hooks.on_start_of_speech(ev, started_at)
        elif ev.type is VADEventType.INFERENCE_DONE:
            self._hooks.on_vad_inference(ev)
        elif ev.type is VADEventType.END_OF_SPEECH:
            stopped_at = now - ev.silence_duration - ev.inference_duration
            self._user_speaking = False
            self._last_speaking_time = stopped_at
            self._hooks.on_end_of_speech(ev, stopped_at)
            if self.turn_detection == "vad":
                self._run_eot_detection()

    def _on_stt_event(self, ev: SpeechEvent) -> None:
        text = ev.alternatives[0].text if ev.alternatives else ""
        if ev.type is SpeechEventType.FINAL_TRANSCRIPT:
            if not text.strip():
                return
            self._finals.append(text.strip())
            self._confidences.append(ev.alternatives[0].confidence)
            self._interim = ""
            self._last_final_time = trio.current_time()
            self._hooks.on_final_transcript(ev)
            if not self._user_speaking and self.turn_detection in ("vad", "stt"):
                self._run_eot_detection()
        elif ev.type in (SpeechEventType.INTERIM_TRANSCRIPT,
                         SpeechEventType.PREFLIGHT_TRANSCRIPT):
            self._interim = text
            self._hooks.on_interim_transcript(ev)
        elif ev.type is SpeechEventType.START_OF_SPEECH and self._vad is None:
            now = trio.current_time()
            self._user_speaking = True
            self._speech_started_at = now
            if self._eot_slot is not None:
                self._eot_slot.cancel()
            self._hooks.on_start_of_speech(None, now)
        elif ev.type is SpeechEventType.END_OF_SPEECH:
            if self._vad is None:
                now = trio.current_time()
                self._user_speaking = False
                self._last_speaking_time = now
                self._hooks.on_end_of_speech(None, now)
            if self.turn_detection == "stt":
                self._run_eot_detection()

    def _run_eot_detection(self) -> None:
        # Reference 3.3: no decision without a transcript when there is an STT.
        if self._stt is not None and not self._finals:
            return
        if self._eot_slot is not None:
            self._eot_slot.replace(self._bounce)

    async def _bounce(self) -> None:
        opts = self._hooks.turn_options()
        now = trio.current_time()
        last = self._last_speaking_time if self._last_speaking_time is not None else now
        wait = opts.endpointing.min_delay - (now - last)
        if wait > 0:
            await trio.sleep(wait)
        now = trio.current_time()
        confidence = (sum(self._confidences) / len(self._confidences)) if self._confidences else 1.0
        info = EndOfTurnInfo(
            new_transcript=self.transcript,
            transcript_confidence=confidence,
            started_speaking_at=self._speech_started_at,
            stopped_speaking_at=last,
            transcription_delay=max((self._last_final_time or last) - last, 0.0),
            end_of_turn_delay=now - last,
        )
        if self._hooks.on_end_of_turn(info):
            self._finals.clear()
            self._interim = ""
            self._confidences.clear()
