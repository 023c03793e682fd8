"""How the session routes what recognition decides, and its rules for model errors.

``RecognitionRouter`` delivers the user's speech, transcripts and end of turn to the
conversation and to the current activity; ``SessionErrorRules`` tells the conversation what
kind an error's source is and closes the session when errors of one kind pile up. Both are
typed against ``RouterSession``, the part of the session they read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import trio

from .activity import Activity
from .chat import ChatContext
from .conversation import Conversation
from .events import (ErrorEvent, UserInputTranscribedEvent, UserTranscriptionTimeoutEvent,
                     UserTurnExceededEvent)
from .hosts import SessionOutputs
from .models import SpeechEvent, VADEvent
from .options import TurnHandling, resolve_turn_handling
from .realtime import is_realtime_model
from .recognition import EndOfTurnInfo


class RouterSession(Protocol):
    """What the router and the error rules read from the session."""

    @property
    def conversation(self) -> Conversation: ...

    @property
    def activity(self) -> Activity | None: ...

    @property
    def closing(self) -> bool: ...

    @property
    def output(self) -> SessionOutputs: ...

    @property
    def turn_handling_overrides(self) -> dict[str, Any]: ...

    @property
    def max_unrecoverable_errors(self) -> int: ...

    @property
    def stt(self) -> object: ...

    @property
    def vad(self) -> object: ...

    @property
    def llm(self) -> object: ...

    @property
    def tts(self) -> object: ...


class SessionErrorRules:
    """The session's error policy: what kind an error's source is, and closing the session
    when errors of one kind pile up."""

    def __init__(self, session: RouterSession, *,
                 give_up: Callable[[BaseException], None]) -> None:
        self._session = session
        self.give_up = give_up

    def classify(self, source: object) -> tuple[str, int]:
        session = self._session
        if source is not None and source is session.output.audio:
            # a stalled output: the next stall with no speech played to its end closes
            return "audio_output", 1
        if is_realtime_model(source):
            # as LiveKit: a realtime session that gave up does not work again on the next
            # request, as an LLM, STT or TTS may; the first unrecoverable error closes
            return "realtime", 0
        kind = ("llm" if source is session.llm else "tts" if source is session.tts
                else "stt" if source is session.stt else "other")
        return kind, session.max_unrecoverable_errors


class RecognitionRouter:
    """Delivers recognition decisions to the session and its current activity.

    While the session closes, transcripts still become events but no longer reach the
    activity (no interruption, no preemptive reply): close commits the trailing turn itself.
    """

    def __init__(self, session: RouterSession, *, refresh_away: Callable[[], None],
                 close_for_error: Callable[[BaseException], None]) -> None:
        self._session = session
        self._conversation = session.conversation
        self._refresh_away = refresh_away
        self._close_for_error = close_for_error

    @property
    def _activity(self) -> Activity | None:
        session = self._session
        return None if session.closing else session.activity

    def turn_options(self) -> TurnHandling:
        activity = self._session.activity
        if activity is None:
            return resolve_turn_handling(self._session.turn_handling_overrides)
        return activity.options

    def turn_context(self, transcript: str) -> ChatContext:
        activity = self._session.activity
        ctx = activity.agent.chat_ctx.copy() if activity is not None else ChatContext()
        ctx.add_message(role="user", content=transcript)
        return ctx

    def server_detects_turns(self) -> bool:
        activity = self._session.activity
        return activity is not None and activity.server_turn_detection

    def on_start_of_speech(self, ev: VADEvent | None, started_at: float) -> None:
        self._conversation.set_user_state("speaking", started_at)
        if self._activity is not None:
            self._activity.interruption.on_start_of_speech()

    def on_vad_inference(self, ev: VADEvent) -> None:
        # once per input frame: the activity is looked up once
        activity = self._activity
        if activity is not None:
            activity.interruption.on_vad_inference(ev.speech_duration)

    def on_end_of_speech(self, ev: VADEvent | None, stopped_at: float) -> None:
        self._conversation.set_user_state("listening", stopped_at)
        if self._activity is not None:
            self._activity.interruption.on_end_of_speech()

    def on_transcription_timeout(self, speech_duration: float, started_at: float) -> None:
        self._conversation.emit("user_transcription_timeout", UserTranscriptionTimeoutEvent(
            speech_duration=speech_duration, vad_speech_started_at=started_at))

    def on_user_turn_exceeded(self, ev: UserTurnExceededEvent) -> None:
        if self._activity is not None:
            self._activity.on_user_turn_exceeded(ev)

    def on_interim_transcript(self, ev: SpeechEvent) -> None:
        text = ev.alternatives[0].text if ev.alternatives else ""
        self._conversation.emit("user_input_transcribed",
                                UserInputTranscribedEvent(transcript=text, is_final=False))
        if self._session.vad is None and text and self._activity is not None:
            # without a VAD, interim transcripts are the first sign of the user's voice
            self._activity.interruption.interrupt_by_audio_activity()

    def on_final_transcript(self, ev: SpeechEvent) -> None:
        alt = ev.alternatives[0]
        if self._conversation.user_state == "away":
            self._conversation.set_user_state("listening", trio.current_time())
        else:
            self._refresh_away()
        self._conversation.emit("user_input_transcribed", UserInputTranscribedEvent(
            transcript=alt.text, is_final=True, language=alt.language or None))
        if self._activity is not None:
            self._activity.on_final_transcript(alt.text)

    def on_end_of_turn(self, info: EndOfTurnInfo) -> bool:
        activity = self._session.activity
        if activity is None:
            return True
        return activity.on_end_of_turn(info)

    def on_recognition_error(self, error: BaseException, source: object) -> None:
        # not counted here: the recognition's restart policy decides when to give up
        self._conversation.emit("error", ErrorEvent(
            error=error, source=source if source is not None else self._session.llm))

    def on_recognition_given_up(self, error: BaseException, source: object) -> None:
        self._close_for_error(error)
