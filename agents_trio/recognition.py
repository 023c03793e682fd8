"""Audio recognition: user audio → VAD and STT → user state, transcripts, end of turn.

It belongs to the session, not to an activity: a handoff or an AgentTask does not tear the
pipeline down, and every decision is delivered to whichever activity is current through
``RecognitionHooks`` (the session routes them). Each input frame is pushed to the VAD and STT
streams directly, with no channel hop in between.

The VAD and STT streams are ``SupervisedStream``s: a stream that fails is reported and
reopened with backoff, and given up (the session then closes with reason ``error``) after too
many failures in a row. What a failed stream leaves behind is settled here: the user is not
left "speaking", and an interim transcript the dead STT can no longer finalize counts as final.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import msgspec
import trio
from livekit import rtc

from ._iterators import aclosing
from .audio_turn import AudioTurnDetector, AudioTurnTracker
from .chat import ChatContext
from .events import UserTurnExceededEvent
from .io.audio import AudioInput, silence_frame
from .io.frame_feed import FeedAttachment
from .models import (STT, VAD, SpeechData, SpeechEvent, SpeechEventType, VADEvent,
                     TurnDetector, VADEventType)
from .nurseries import LatestSlot, Wakeup, sleep_precisely
from .options import TurnHandling
from .recognition_streams import RestartPolicy, StreamState, SupervisedStream

logger = logging.getLogger("agents_trio")


SttNode = Callable[[AsyncIterable[Any]], AsyncIterator[SpeechEvent]]

# At close the STT is flushed with this much silence, in frames of 0.2 s (as LiveKit does).
CLOSE_FLUSH_DURATION = 2.0
_FLUSH_FRAME = 0.2
_RECENT_FINAL = 0.5  # a final transcript this recent needs no wait on a manual commit


class _NodeStream:
    """An overridden ``stt_node`` seen as an STT stream: frames go in through a channel."""

    def __init__(self, send: trio.MemorySendChannel[Any], events: AsyncIterator[SpeechEvent]
                 ) -> None:
        self._send = send
        self._events = events

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        self._send.send_nowait(frame)

    def end_input(self) -> None:
        self._send.close()

    def __aiter__(self) -> AsyncIterator[SpeechEvent]:
        return self._events


class EndOfTurnInfo(msgspec.Struct, kw_only=True):
    new_transcript: str
    transcript_confidence: float = 1.0
    started_speaking_at: float | None = None
    stopped_speaking_at: float | None = None
    transcription_delay: float = 0.0
    end_of_turn_delay: float = 0.0
    skip_reply: bool = False  # a committed turn recorded without a reply


class RecognitionHooks(Protocol):
    def turn_options(self) -> TurnHandling: ...
    def turn_context(self, transcript: str) -> ChatContext: ...
    def server_detects_turns(self) -> bool: ...
    def on_start_of_speech(self, ev: VADEvent | None, started_at: float) -> None: ...
    def on_vad_inference(self, ev: VADEvent) -> None: ...
    def on_end_of_speech(self, ev: VADEvent | None, stopped_at: float) -> None: ...
    def on_interim_transcript(self, ev: SpeechEvent) -> None: ...
    def on_final_transcript(self, ev: SpeechEvent) -> None: ...
    def on_end_of_turn(self, info: EndOfTurnInfo) -> bool: ...
    def on_transcription_timeout(self, speech_duration: float, started_at: float) -> None: ...
    def on_user_turn_exceeded(self, ev: UserTurnExceededEvent) -> None: ...
    def on_recognition_error(self, error: BaseException, source: object) -> None: ...
    def on_recognition_given_up(self, error: BaseException, source: object) -> None: ...


class RecognitionPhase(enum.Enum):
    LISTENING = "listening"
    CLOSING = "closing"   # the session closes: transcripts are collected, no turn is decided


class AudioRecognition:
    """Runs the VAD and STT streams over the user's audio and decides end of turn.

    The turn detection in force is the current agent's (``hooks.turn_options()``): a mode
    (``"vad"``, ``"stt"``, ``"manual"``, ``"realtime_llm"``), a turn detector object (the
    mode is then chosen from the models, and the detector may lengthen the endpointing delay),
    or None (VAD when there is one, else STT, else manual). ``"realtime_llm"`` without a
    realtime model that detects turns falls back to the automatic choice, as in LiveKit. An
    audio turn detector (``inference.TurnDetector``) is fed the user's audio and asked while
    the user pauses (:class:`agents_trio.audio_turn.AudioTurnTracker`).

    Args:
        hooks: Receives every decision (the session).
        vad: Voice activity detection, or None.
        stt: Speech to text, or None.
        stt_node: An agent's overridden ``stt_node``, run instead of the STT's stream.
        restart_policy: How failed VAD and STT streams are reopened.
    """

    def __init__(self, hooks: RecognitionHooks, *, vad: VAD | None, stt: STT | None,
                 stt_node: SttNode | None = None,
                 transcription_timeout: float | None = None,
                 restart_policy: RestartPolicy | None = None) -> None:
        self._hooks = hooks
        self._vad = vad
        self._stt = stt
        self._stt_node = stt_node
        self._restart_policy = restart_policy or RestartPolicy()
        # where the user's frames also go (a realtime model's session), or None
        self.audio_sink: Callable[[Any], None] | None = None
        self._sink_failing = False
        self._auto_mode = "vad" if vad is not None else ("stt" if stt is not None else "manual")
        self._phase = RecognitionPhase.LISTENING
        self._finals: list[str] = []
        self._interim = ""
        self._confidences: list[float] = []
        self._language = ""
        self._user_speaking = False
        self._speech_started_at: float | None = None
        self._last_speaking_time: float | None = None
        self._last_final_time: float | None = None
        self._eot_slot: LatestSlot | None = None
        self._nursery: trio.Nursery | None = None   # start's: where the tasks run
        # an audio turn detector's feed, made when the first one comes into force
        self._audio_turns: AudioTurnTracker | None = None
        self._changed = Wakeup()   # the user's state or the transcripts changed
        self._vad_stream: SupervisedStream | None = None
        self._stt_stream: SupervisedStream | None = None
        self._input_stopped = False   # _stop_input was called
        self._pull_scope: trio.CancelScope | None = None   # a pulled input's, while pulled
        self._input_link: FeedAttachment[rtc.AudioFrame] | None = None  # a pushing input's
        self._input_done = False
        self._input_enabled = True  # session.input.set_audio_enabled
        # transcription timeout: the open turn's untranscribed speech, and its timer
        self._transcription_timeout = transcription_timeout
        self._untranscribed = 0.0
        self._untranscribed_since: float | None = None
        self._transcribed = False
        self._timeout_slot: LatestSlot | None = None
        # user turn limit: what the user said since the agent last spoke
        self._limit_started_at: float | None = None
        self._limit_words = 0
        self._limit_transcript = ""
        self._sample_rate = 16000

    # -- state ---------------------------------------------------------------------------------
    @property
    def turn_detection(self) -> str:
        """The turn detection mode in force."""
        value = self._hooks.turn_options().turn_detection
        if not isinstance(value, str):
            return self._auto_mode
        if value == "realtime_llm" and not self._hooks.server_detects_turns():
            return self._auto_mode  # as LiveKit: no server turn detection to rely on
        return value

    @property
    def turn_detector(self) -> TurnDetector | AudioTurnDetector | None:
        """The turn detector object in force, or None."""
        value = self._hooks.turn_options().turn_detection
        return None if value is None or isinstance(value, str) else value

    def refresh_turn_detector(self) -> None:
        """The turn detection in force may have changed (another agent, ``update_options``):
        feed the audio turn detector now in force, if any. Speech starts check it too."""
        self._follow_audio_detector()

    def _follow_audio_detector(self) -> None:
        """Feed the audio turn detector in force (the tracker is made for the first one)."""
        detector = self._audio_detector()
        if self._audio_turns is None:
            if detector is None or self._nursery is None:
                return
            self._audio_turns = AudioTurnTracker(self._nursery,
                                                 on_error=self._hooks.on_recognition_error)
        self._audio_turns.use(detector)

    def _audio_detector(self) -> AudioTurnDetector | None:
        """The audio turn detector to feed: as in LiveKit, none without a VAD (it asks for
        predictions on the VAD's silence) or while a realtime model detects turns itself."""
        detector = self.turn_detector
        if (not isinstance(detector, AudioTurnDetector) or self._vad is None
                or self._hooks.server_detects_turns()):
            return None
        return detector

    @property
    def transcript(self) -> str:
        """The final transcripts of the open user turn, joined."""
        return " ".join(self._finals)

    @property
    def current_transcript(self) -> str:
        """Finals plus the latest interim transcript."""
        return " ".join([*self._finals, self._interim]).strip()

    @property
    def input_detached(self) -> bool:
        """The user's audio no longer reaches the streams (its input ended or is disabled)."""
        return self._input_done or not self._input_enabled

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

    async def wait_user_idle(self) -> None:
        """Wait until the user is not speaking and no end of turn is being decided.

        Cancellation: a checkpoint only.
        """
        while True:
            if self._eot_slot is not None and self._eot_slot.occupied:
                await self._eot_slot.wait_idle()
            elif self._user_speaking:
                await self._changed.wait()
            else:
                return

    def clear_user_turn(self, *, restart_stt: bool = False) -> None:
        """Forget the open user turn (its transcripts and pending decision); with
        ``restart_stt``, also what the STT heard of it (a fresh STT stream is opened)."""
        self._finals.clear()
        self._interim = ""
        self._confidences.clear()
        if self._eot_slot is not None:
            self._eot_slot.cancel()
        if self._audio_turns is not None:
            self._audio_turns.on_turn_ended("clear_user_turn")
        self._reset_transcription_timeout()
        self.on_agent_speech_started()  # the turn limit counts afresh too
        if restart_stt:
            self._speech_started_at = self._last_speaking_time = self._last_final_time = None
            if self._stt_stream is not None:
                self._stt_stream.reopen()

    async def commit_user_turn(self, *, transcript_timeout: float, stt_flush_duration: float,
                               skip_reply: bool, audio_detached: bool) -> str:
        """End the user turn now (manual turn detection) and return its transcript.

        Without a final transcript in the last half second, waits up to
        ``transcript_timeout`` for one (the STT is first flushed with
        ``stt_flush_duration`` of silence when the audio input is detached); an interim
        transcript left then counts as final. The turn is then decided as usual (the
        endpointing delay after the user's last speech), with ``skip_reply`` passed on.
        Without an STT, or while closing, returns "" and decides nothing.

        Cancellation: cancelling the wait decides nothing; the transcripts stay in the turn.
        """
        if self._stt is None or self._phase is RecognitionPhase.CLOSING:
            return ""
        last_final = self._last_final_time
        if last_final is None or trio.current_time() - last_final > _RECENT_FINAL:
            finals = len(self._finals)
            if audio_detached:
                self._flush_with_silence(stt_flush_duration)
            with trio.move_on_after(transcript_timeout):
                while len(self._finals) == finals:
                    await self._changed.wait()
        self._promote_interim()
        transcript = self.transcript
        self._run_eot_detection(skip_reply=skip_reply, manual=True)
        return transcript

    # -- running -------------------------------------------------------------------------------
    async def start(self, nursery: trio.Nursery, audio: AsyncIterable[Any]) -> None:
        """Start recognizing ``audio`` in ``nursery`` (the caller's): the VAD and STT
        streams (each open, or its first opening failed, on return), the input's task, and
        later the end-of-turn decisions and the audio turn detector's stream all run there,
        with no nursery of the recognition's own. The input's task ends with the input (the
        streams' input is then ended and they finish), or with a frame handler's error,
        which it raises into ``nursery``.

        Cancellation: cancelling ``nursery`` stops everything the recognition runs; nothing
        is committed. Cancelling this call while it starts leaves what it started so far in
        ``nursery``.
        """
        self._eot_slot = LatestSlot(nursery)
        if self._transcription_timeout is not None and self._stt is not None:
            self._timeout_slot = LatestSlot(nursery)   # only a timeout to watch needs one
        self._nursery = nursery
        self._follow_audio_detector()
        if self._vad is not None:
            self._vad_stream = SupervisedStream(
                self._vad.stream, hooks=_VadReport(self, self._hooks, self._vad),
                policy=self._restart_policy, name="VAD")
            await nursery.start(self._vad_stream.run,
                                name="agents_trio.recognition.AudioRecognition.vad")
        if self._stt is not None:
            self._stt_stream = SupervisedStream(
                self._stt.stream if self._stt_node is None else self._open_stt_node,
                hooks=_SttReport(self, self._hooks, self._stt),
                policy=self._restart_policy, name="STT")
            await nursery.start(self._stt_stream.run,
                                name="agents_trio.recognition.AudioRecognition.stt")
        await nursery.start(self._take_input, audio,
                            name="agents_trio.recognition.AudioRecognition.input")

    @asynccontextmanager
    async def _open_stt_node(self) -> AsyncIterator[_NodeStream]:
        """A fresh call of the overridden ``stt_node`` (each restart calls it again)."""
        assert self._stt_node is not None
        frames_send, frames_recv = trio.open_memory_channel[Any](math.inf)
        async with frames_recv, aclosing(self._stt_node(frames_recv)) as events:
            yield _NodeStream(frames_send, events)

    async def _take_input(self, audio: AsyncIterable[Any], *,
                          task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                          ) -> None:
        """Take the input's frames until it ends: pushed to us through its feed when it has
        one (no wake-up of this task per frame), else pulled one at a time. Then the streams'
        input ends.

        Cancellation: stops taking frames; the streams' input is not ended.
        """
        task_status.started()   # attached below before the starter resumes: no checkpoint
        del task_status   # not kept: it holds the nursery this task was started in
        feed = audio.feed if isinstance(audio, AudioInput) else None
        if feed is not None:
            with feed.attached(self._on_frame) as link:
                self._input_link = link
                if not self._input_stopped:   # else: detached on leaving the block
                    await link.wait()
        elif not self._input_stopped:
            on_frame = self._on_frame
            with trio.CancelScope() as self._pull_scope:
                async for frame in audio:
                    on_frame(frame)
            self._pull_scope = None
        self._input_done = True
        if not self._input_stopped:
            for stream in (self._vad_stream, self._stt_stream):
                if stream is not None:
                    stream.end_input()

    def _on_frame(self, frame: rtc.AudioFrame) -> None:
        if not self._input_enabled:  # LiveKit's detached input: its frames are dropped
            return
        self._sample_rate = frame.sample_rate
        if self.audio_sink is not None:
            self._push_to_sink(frame)
        audio_turns = self._audio_turns
        if audio_turns is not None:
            audio_turns.push_audio(frame)
        if self._vad_stream is not None:
            self._vad_stream.push_frame(frame)
        if self._stt_stream is not None:
            self._stt_stream.push_frame(frame)

    def _stop_input(self) -> None:
        """Stop taking the input's frames, now: a pulled frame is not taken any more and a
        pushed one no longer reaches us (the feed buffers it)."""
        self._input_stopped = True
        if self._pull_scope is not None:
            self._pull_scope.cancel()
        if self._input_link is not None:
            self._input_link.detach()

    def set_input_enabled(self, enabled: bool) -> None:
        """Listen to the audio input or not (``session.input.set_audio_enabled``): while not,
        its frames are dropped; turning it off while the user speaks ends their speech."""
        self._input_enabled = enabled
        if not enabled and self._user_speaking:
            self._end_user_speech(None)

    def _push_to_sink(self, frame: rtc.AudioFrame) -> None:
        assert self.audio_sink is not None
        try:
            self.audio_sink(frame)
        except Exception as e:
            # reported once per run of failures: the sink's owner (the realtime link) recovers
            if not self._sink_failing:
                self._sink_failing = True
                logger.warning("pushing the user's audio to the realtime model failed: %r", e)
                self._hooks.on_recognition_error(e, None)
            return
        self._sink_failing = False

    # -- close ---------------------------------------------------------------------------------
    async def finish_user_turn(self, timeout: float) -> None:
        """Stop deciding turns; if the user's turn is still being transcribed, detach the
        input, flush the STT with silence and wait at most ``timeout`` for a final transcript
        (or for the user to stop with nothing left to transcribe). An interim transcript left
        then counts as final. ``transcript`` is what the user said.

        Cancellation: a checkpoint only when it waits; cancelling the wait keeps what was
        transcribed so far, the interim included.
        """
        self._phase = RecognitionPhase.CLOSING
        if self._eot_slot is not None:
            self._eot_slot.cancel()
        try:
            if self._final_expected(timeout):
                self._stop_input()
                self._flush_with_silence(CLOSE_FLUSH_DURATION)
                finals = len(self._finals)   # no turn is decided while closing: only grows
                with trio.move_on_after(timeout):
                    while self._awaiting_final() and len(self._finals) == finals:
                        await self._changed.wait()
        finally:
            self._promote_interim()

    def _final_expected(self, within: float) -> bool:
        """The STT is listening and what the user said last has no final transcript yet (a
        speech that ended more than ``within`` ago with no words at all is not waited for)."""
        stt = self._stt_stream
        if stt is None or stt.state is not StreamState.OPEN or not self._awaiting_final():
            return False
        if self._user_speaking or self._interim.strip() or self._last_speaking_time is None:
            return True
        return trio.current_time() - self._last_speaking_time < within

    def _awaiting_final(self) -> bool:
        if self._user_speaking or self._interim.strip():
            return True
        started, final_at = self._speech_started_at, self._last_final_time
        return started is not None and (final_at is None or final_at < started)

    def _flush_with_silence(self, duration: float) -> None:
        frame = silence_frame(_FLUSH_FRAME, sample_rate=self._sample_rate)
        for _ in range(math.ceil(duration / _FLUSH_FRAME - 1e-9)):
            for stream in (self._vad_stream, self._stt_stream):
                if stream is not None:
                    stream.push_frame(frame)

    def _promote_interim(self) -> None:
        """An interim transcript that will get no final (its stream died, or close) counts as
        final: the user's words are kept."""
        text = self._interim.strip()
        if text:
            self.on_stt_event(SpeechEvent(
                type=SpeechEventType.FINAL_TRANSCRIPT,
                alternatives=[SpeechData(text=text, language=self._language)]))

    # -- what the streams report (through their _VadReport, _SttReport) -----------------------
    def on_vad_lost(self) -> None:
        """The VAD stream failed: what its incarnation was doing is settled."""
        # no stuck "speaking": the restarted VAD starts from silence (as LiveKit resets it
        # when its VAD task ends); the transcript so far stays in the open turn
        if self._user_speaking:
            self._end_user_speech(None)

    def on_stt_lost(self) -> None:
        """The STT stream failed: what its incarnation was doing is settled."""
        if self._vad is None and self._user_speaking:
            self._end_user_speech(None)
        self._promote_interim()

    # -- decisions -----------------------------------------------------------------------------
    def on_vad_event(self, ev: VADEvent) -> None:
        """An event of the VAD stream."""
        kind = ev.type
        if kind is VADEventType.INFERENCE_DONE:    # one per input frame: checked first
            self._hooks.on_vad_inference(ev)
            if self._audio_turns is not None:
                self._audio_turns.on_vad_inference(ev, speaking=self._user_speaking)
        elif kind is VADEventType.START_OF_SPEECH:
            self._start_user_speech(
                ev, trio.current_time() - ev.speech_duration - ev.inference_duration)
        elif kind is VADEventType.END_OF_SPEECH:
            self._end_user_speech(
                ev, trio.current_time() - ev.silence_duration - ev.inference_duration)
            self._arm_transcription_timeout(ev)
            if self.turn_detection == "vad":
                self._run_eot_detection()

    def _start_user_speech(self, ev: VADEvent | None, started_at: float) -> None:
        if self._timeout_slot is not None:
            self._timeout_slot.cancel()
        if self._untranscribed_since is None:
            self._untranscribed_since = started_at
        self._user_speaking = True
        self._speech_started_at = started_at
        if self._eot_slot is not None:
            self._eot_slot.cancel()
        self._follow_audio_detector()  # the agent in force may have changed
        if self._audio_turns is not None:
            self._audio_turns.on_speech_started()
        self._changed.notify()
        self._hooks.on_start_of_speech(ev, started_at)

    def _end_user_speech(self, ev: VADEvent | None, stopped_at: float | None = None) -> None:
        stopped_at = trio.current_time() if stopped_at is None else stopped_at
        self._user_speaking = False
        self._last_speaking_time = stopped_at
        self._changed.notify()
        self._hooks.on_end_of_speech(ev, stopped_at)

    def on_stt_event(self, ev: SpeechEvent) -> None:
        """An event of the STT stream (or an interim promoted to final)."""
        text = ev.alternatives[0].text if ev.alternatives else ""
        if ev.type is SpeechEventType.FINAL_TRANSCRIPT:
            if not text.strip():
                return
            self._finals.append(text.strip())
            self._transcribed = True
            if self._timeout_slot is not None:
                self._timeout_slot.cancel()
            self._confidences.append(ev.alternatives[0].confidence)
            self._language = ev.alternatives[0].language or self._language
            self._interim = ""
            self._check_user_turn_limit(text.strip())
            self._last_final_time = trio.current_time()
            self._changed.notify()
            self._hooks.on_final_transcript(ev)
            if not self._user_speaking and self.turn_detection in ("vad", "stt"):
                self._run_eot_detection()
        elif ev.type in (SpeechEventType.INTERIM_TRANSCRIPT,
                         SpeechEventType.PREFLIGHT_TRANSCRIPT):
            self._interim = text
            self._changed.notify()
            self._hooks.on_interim_transcript(ev)
        elif ev.type is SpeechEventType.START_OF_SPEECH and self._vad is None:
            self._start_user_speech(None, trio.current_time())
        elif ev.type is SpeechEventType.END_OF_SPEECH:
            if self._vad is None:
                self._end_user_speech(None)
            if self.turn_detection == "stt":
                self._run_eot_detection()

    def _run_eot_detection(self, *, skip_reply: bool = False, manual: bool = False) -> None:
        if self._phase is RecognitionPhase.CLOSING:
            return  # the session commits the trailing turn itself, unanswered
        # Reference 3.3: no decision without a transcript when there is an STT (a turn
        # committed by hand in manual mode is decided even empty, as LiveKit does)
        if self._stt is not None and not self._finals and not (
                manual and self.turn_detection == "manual"):
            return
        if self._eot_slot is not None:
            self._eot_slot.replace(self._bounce, skip_reply)

    async def _bounce(self, skip_reply: bool = False) -> None:
        opts = self._hooks.turn_options()
        now = trio.current_time()
        last = self._last_speaking_time if self._last_speaking_time is not None else now
        delay = opts.endpointing.min_delay
        detector = self.turn_detector
        if detector is not None and await self._end_of_turn_unlikely(detector):
            delay = max(delay, opts.endpointing.max_delay)
        wait = delay - (trio.current_time() - last)
        if wait > 0:
            # on the reply's critical path: woken when due, not at the next millisecond
            await sleep_precisely(wait)
        now = trio.current_time()
        confidence = (sum(self._confidences) / len(self._confidences)) if self._confidences else 1.0
        info = EndOfTurnInfo(
            new_transcript=self.transcript,
            transcript_confidence=confidence,
            started_speaking_at=self._speech_started_at,
            stopped_speaking_at=last,
            transcription_delay=max((self._last_final_time or last) - last, 0.0),
            end_of_turn_delay=now - last,
            skip_reply=skip_reply,
        )
        if self._hooks.on_end_of_turn(info):
            if self._audio_turns is not None:
                self._audio_turns.on_turn_ended("turn committed")
            self._finals.clear()
            self._interim = ""
            self._confidences.clear()
            self._reset_transcription_timeout()

    # -- user turn limit -----------------------------------------------------------------
    def on_agent_speech_started(self) -> None:
        """The agent speaks: the user's words are counted afresh for the turn limit."""
        self._limit_started_at = None
        self._limit_words = 0
        self._limit_transcript = ""

    def _check_user_turn_limit(self, text: str) -> None:
        """A final transcript: tell the hooks when the user has now said too much, or talked
        too long, since the agent last spoke."""
        limit = self._hooks.turn_options().user_turn_limit
        if limit.max_words is None and limit.max_duration is None:
            return
        now = trio.current_time()
        if self._limit_started_at is None:
            self._limit_started_at = (self._speech_started_at
                                      if self._speech_started_at is not None else now)
        self._limit_words += len(text.split())
        self._limit_transcript = f"{self._limit_transcript} {text}".strip()
        duration = now - self._limit_started_at
        if ((limit.max_words is not None and self._limit_words >= limit.max_words)
                or (limit.max_duration is not None and duration >= limit.max_duration)):
            self._hooks.on_user_turn_exceeded(UserTurnExceededEvent(
                transcript=self.current_transcript, accumulated_transcript=self._limit_transcript,
                accumulated_word_count=self._limit_words, duration=duration))

    # -- transcription timeout -----------------------------------------------------------
    def _arm_transcription_timeout(self, ev: VADEvent) -> None:
        """Speech ended without a transcript in this turn yet: report it if none arrives
        within ``transcription_timeout`` of the speech's end (VAD and STT both needed)."""
        if (self._transcription_timeout is None or self._stt is None or self._transcribed
                or self._timeout_slot is None):
            return
        self._untranscribed += ev.speech_duration
        wait = max(0.0, self._transcription_timeout - ev.silence_duration
                   - ev.inference_duration)
        self._timeout_slot.replace(self._transcription_timed_out, wait)

    async def _transcription_timed_out(self, wait: float) -> None:
        await trio.sleep(wait)
        if self._transcribed or self._untranscribed_since is None:
            return
        self._hooks.on_transcription_timeout(self._untranscribed, self._untranscribed_since)

    def _reset_transcription_timeout(self) -> None:
        """A new user turn: nothing untranscribed yet."""
        if self._timeout_slot is not None:
            self._timeout_slot.cancel()
        self._untranscribed = 0.0
        self._untranscribed_since = None
        self._transcribed = False

    async def _end_of_turn_unlikely(self, detector: TurnDetector | AudioTurnDetector) -> bool:
        """Ask the turn detector (reference 3.3 step 1): below its threshold, the turn waits
        for ``max_delay``. A failing detector is reported and ignored for this turn."""
        language = self._language or None
        if isinstance(detector, AudioTurnDetector):
            if self._audio_turns is None or self._audio_detector() is None:
                return False
            try:
                return await self._audio_turns.end_of_turn_unlikely(language)
            except Exception as e:
                logger.warning("the audio turn detector failed: %r", e)
                self._hooks.on_recognition_error(e, detector)
                return False
        try:
            if not await detector.supports_language(language):
                return False
            threshold = await detector.unlikely_threshold(language)
            if threshold is None:
                return False
            probability = await detector.predict_end_of_turn(
                self._hooks.turn_context(self.transcript))
        except Exception as e:
            logger.warning("the turn detector failed: %r", e)
            self._hooks.on_recognition_error(e, detector)
            return False
        return bool(probability < threshold)


class _StreamReport:
    """What one of the recognition's streams reports (a ``StreamReport``): events and losses
    to the recognition, failures to its hooks naming the failing model. One object per stream
    whose methods are looked up on each report: nothing else is kept alive for it."""

    __slots__ = ("_hooks", "_recognition", "_source")

    def __init__(self, recognition: AudioRecognition, hooks: RecognitionHooks,
                 source: object) -> None:
        self._recognition = recognition
        self._hooks = hooks
        self._source = source

    def on_error(self, error: BaseException) -> None:
        self._hooks.on_recognition_error(error, self._source)

    def on_given_up(self, error: BaseException) -> None:
        self._hooks.on_recognition_given_up(error, self._source)


class _VadReport(_StreamReport):
    __slots__ = ()

    def on_event(self, ev: VADEvent) -> None:
        self._recognition.on_vad_event(ev)

    def on_lost(self) -> None:
        self._recognition.on_vad_lost()


class _SttReport(_StreamReport):
    __slots__ = ()

    def on_event(self, ev: SpeechEvent) -> None:
        self._recognition.on_stt_event(ev)

    def on_lost(self) -> None:
        self._recognition.on_stt_lost()
