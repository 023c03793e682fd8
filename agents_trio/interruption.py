"""Interruption by the user's voice, and false-interruption resume (reference §4.1-4.4).

Owned by one activity. When the user's speech reaches the threshold, the playing speech is
either interrupted, or — with a pausable output and resume enabled — paused; if the user then
stops without a transcript, the speech resumes after ``false_interruption_timeout``. The resume
timer is a task in a latest-wins slot of the activity's nursery, so a new start of speech or a
real interruption replaces or cancels it.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import msgspec
import trio

from .agent_state import AgentStateRules
from .events import AgentFalseInterruptionEvent, AgentState
from .hosts import ActivityHost
from .io.audio import AudioOutput
from .nurseries import LatestSlot
from .options import TurnHandling
from .speech_handle import SpeechHandle



class InterruptionHost(Protocol):
    """What the interruption logic needs from its activity."""

    @property
    def session(self) -> ActivityHost[Any]: ...

    @property
    def options(self) -> TurnHandling: ...

    @property
    def current_speech(self) -> SpeechHandle | None: ...

    @property
    def server_turn_detection(self) -> bool: ...

    @property
    def agent_state(self) -> AgentStateRules: ...


def words(text: str) -> list[str]:
    """Case-folded words, ignoring punctuation (for min_words and transcript comparison)."""
    return re.findall(r"[\w']+", text.casefold())


class _Pause(msgspec.Struct, kw_only=True):
    """The audio output is paused for ``speech`` (a possible false interruption)."""

    speech: SpeechHandle
    saved_state: AgentState | None = None  # None while only pre-paused (§4.3)
    resume_after: float = 0.0           # from the user's end of speech; 0 for a pre-pause


class AudioInterruption:
    """Decides what the user's voice does to the activity's current speech."""

    def __init__(self, activity: InterruptionHost) -> None:
        self._activity = activity
        self._pause: _Pause | None = None
        self._resume_slot: LatestSlot | None = None

    def bind(self, nursery: trio.Nursery) -> None:
        self._resume_slot = LatestSlot(nursery)

    @property
    def _session(self) -> ActivityHost[Any]:
        return self._activity.session

    @property
    def _paused_output(self) -> AudioOutput:
        """The output a pause acts on: there is one (``can_pause`` checked it)."""
        output = self._session.output.audio
        assert output is not None
        return output

    def can_pause(self) -> bool:
        opts = self._activity.options.interruption
        output = self._session.output.audio
        return (opts.resume_false_interruption and opts.false_interruption_timeout is not None
                and output is not None and output.can_pause)

    def on_start_of_speech(self) -> None:
        self._cancel_resume()
        current = self._activity.current_speech
        # §4.3: the user started speaking before the reply played: hold its first frame
        if (self._activity.agent_state.value == "thinking" and self._pause is None
                and current is not None and current.allow_interruptions
                and not current.interrupted and self._activity.options.interruption.enabled
                and self.can_pause()):
            self._pause = _Pause(speech=current, resume_after=0.0)
            self._paused_output.pause()

    def on_vad_inference(self, speech_duration: float) -> None:
        if speech_duration >= self._activity.options.interruption.min_duration:
            self.interrupt_by_audio_activity()

    def on_end_of_speech(self) -> None:
        """The user stopped: a pause resumes after its timeout unless a transcript or a
        committed turn turns it into an interruption first (a pre-pause resumes at once)."""
        pause = self._valid_pause()
        if pause is None or self._resume_slot is None:
            return
        self._resume_slot.replace(self._resume_after, pause.resume_after)

    def on_final_transcript(self) -> None:
        """A final transcript: interrupt by voice, and turn a pause into an interruption."""
        self.interrupt_by_audio_activity()
        pause = self._valid_pause()
        if pause is not None and pause.saved_state is not None:
            pause.speech.interrupt()

    def interrupt_by_audio_activity(self) -> None:
        opts = self._activity.options.interruption
        speech = self._activity.current_speech
        if (speech is None or speech.interrupted or not speech.allow_interruptions
                or not opts.enabled or self._activity.server_turn_detection
                or self._session.aec_warmup_active):
            return
        recognition = self._session.recognition
        if (opts.min_words > 0 and recognition is not None and self._session.stt is not None
                and len(words(recognition.current_transcript)) < opts.min_words):
            return
        self._cancel_resume()
        if not self.can_pause():
            speech.interrupt()
            return
        if self._pause is not None and self._pause.speech is speech:
            if self._pause.saved_state is not None:
                return
        else:
            self._paused_output.pause()
        agent_state = self._activity.agent_state
        self._pause = _Pause(speech=speech, saved_state=agent_state.value,
                             resume_after=opts.false_interruption_timeout or 0.0)
        agent_state.on_false_interruption_paused()

    def _valid_pause(self) -> _Pause | None:
        """The pause, while its speech allows interruptions. A speech that disallowed them
        since it was paused plays on, as in LiveKit: the pause is undone (the output resumes,
        the agent's state is restored) and None returned."""
        pause = self._pause
        if pause is None or pause.speech.allow_interruptions:
            return pause
        self._pause = None
        self._cancel_resume()
        if pause.saved_state is not None and pause.speech is self._activity.current_speech:
            self._activity.agent_state.on_false_interruption_resumed(pause.saved_state)
        self._paused_output.resume()
        return None

    def release(self, handle: SpeechHandle) -> None:
        """``handle`` finished its generation step or was interrupted: undo its pause."""
        pause = self._pause
        if pause is not None and pause.speech is handle:
            self._pause = None
            self._cancel_resume()
            self._paused_output.resume()

    def _cancel_resume(self) -> None:
        if self._resume_slot is not None:
            self._resume_slot.cancel()

    async def _resume_after(self, timeout: float) -> None:
        await trio.sleep(timeout)
        pause, self._pause = self._pause, None
        if pause is None:
            return
        if pause.speech.done() or pause.speech is not self._activity.current_speech:
            self._paused_output.resume()  # the pause outlived its speech: undo it
            self._session.conversation.emit("agent_false_interruption",
                                            AgentFalseInterruptionEvent(resumed=False))
            return
        if pause.saved_state is not None:  # a pre-pause never changed the state
            self._activity.agent_state.on_false_interruption_resumed(pause.saved_state)
        self._paused_output.resume()
        self._session.conversation.emit("agent_false_interruption",
                                        AgentFalseInterruptionEvent(resumed=True))
