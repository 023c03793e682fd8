"""Preemptive generation (reference §6): start the reply at the final transcript, before the
end of turn is decided, and use it only if nothing it depended on changed.

It never starts while a tool of the activity is running (the running tools are a fact of the
activity's structure: each one is registered for exactly the time its task runs), and a tool
starting cancels it, so no LLM request can hold a function call without its output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

import msgspec

from .instructions import InputModality
from .chat import ChatContext, ChatMessage
from .hosts import ActivityBasics, TurnTaking
from .interruption import words
from .models import ToolChoice
from .speech_handle import SpeechHandle



class PreemptiveHost(ActivityBasics, TurnTaking, Protocol):
    """What preemptive generation needs from its activity."""

    @property
    def llm(self) -> object: ...

    @property
    def tools_running(self) -> bool: ...

    def tool_names(self) -> list[str]: ...

    def generate_reply(self, *, user_message: ChatMessage | None = None,
                       chat_ctx: ChatContext | None = None, instructions: str | None = None,
                       tool_choice: ToolChoice | None = None,
                       allow_interruptions: bool | None = None,
                       schedule: bool = True,
                       input_modality: InputModality = "text") -> SpeechHandle: ...


class _Attempt(msgspec.Struct, kw_only=True):
    handle: SpeechHandle
    user_message: ChatMessage
    transcript: str
    snapshot: ChatContext
    tool_names: list[str]


class PreemptiveGeneration:
    """The latest preemptive reply of an activity (at most one).

    Latest wins: a new final transcript replaces the attempt, and so do the events that make
    it stale — a tool starting, a drain, an interruption (``discard``). A user turn owns the
    attempt while it is handled (``turn()``): it takes it as its reply when it is still
    valid, and a turn that ends without a reply discards it.
    """

    def __init__(self, activity: PreemptiveHost) -> None:
        self._activity = activity
        self._attempt: _Attempt | None = None
        self._attempts = 0

    def _replace(self, attempt: _Attempt | None) -> _Attempt | None:
        """Put ``attempt`` in the slot; the one it replaces is returned (not interrupted)."""
        old, self._attempt = self._attempt, attempt
        return old

    def reset_attempts(self) -> None:
        self._attempts = 0

    def start(self) -> None:
        """Start a preemptive reply for the transcript so far, replacing the previous one."""
        activity = self._activity
        opts = activity.options.preemptive_generation
        recognition = activity.session.recognition
        current = activity.current_speech
        # as in LiveKit, none starts once new turns are blocked (a handoff or the drain: no
        # turn would take it, and the drain would wait for it for ever) or while paused
        if (not opts.enabled or not activity.takes_new_turns or activity.llm is None
                or recognition is None or (current is not None and not current.interrupted)
                # manual turns: nothing is drafted before the user's turn is committed
                or recognition.turn_detection == "manual"
                or activity.tools_running
                or recognition.user_speech_duration > opts.max_speech_duration
                or self._attempts >= opts.max_retries):
            return
        transcript = recognition.transcript
        self.discard()  # before the new reply exists: its events come after the old one ends
        self._attempts += 1
        message = ChatMessage(role="user", content=[transcript])
        snapshot = activity.agent.live_chat_ctx.copy()
        handle = activity.generate_reply(user_message=message, chat_ctx=snapshot,
                                         schedule=False, input_modality="audio")
        self._replace(_Attempt(handle=handle, user_message=message, transcript=transcript,
                               snapshot=snapshot, tool_names=activity.tool_names()))

    @contextmanager
    def turn(self) -> Iterator[PreemptiveTurn]:
        """Handle a user turn: ``take`` gives its reply; leaving the block without taking
        discards the attempt (the turn is not answered)."""
        turn = PreemptiveTurn(self._take)
        yield turn
        if not turn.taken:
            self.discard()

    def _take(self, transcript: str, turn_ctx: ChatContext, message: ChatMessage
              ) -> SpeechHandle | None:
        attempt = self._replace(None)
        if attempt is None:
            return None
        valid = (not attempt.handle.done() and not attempt.handle.interrupted
                 and not self._activity.tools_running
                 and words(attempt.transcript) == words(transcript)
                 and attempt.snapshot.is_equivalent(turn_ctx)
                 and attempt.tool_names == self._activity.tool_names())
        if not valid:
            attempt.handle.interrupt(force=True)
            return None
        attempt.user_message.content = [transcript]
        attempt.user_message.transcript_confidence = message.transcript_confidence
        attempt.user_message.metrics.update(message.metrics)  # the reply's request holds it
        return attempt.handle

    def discard(self) -> None:
        """The attempt is stale (a tool started, the agent drains or is interrupted, a turn
        went unanswered): interrupt it."""
        attempt = self._replace(None)
        if attempt is not None:
            attempt.handle.interrupt(force=True)


class PreemptiveTurn:
    """A user turn's claim on the preemptive reply (see ``PreemptiveGeneration.turn``)."""

    def __init__(self, take: Callable[[str, ChatContext, ChatMessage], SpeechHandle | None]
                 ) -> None:
        self._take = take
        self.taken = False

    def take(self, transcript: str, turn_ctx: ChatContext, message: ChatMessage
             ) -> SpeechHandle | None:
        """The preemptive reply, if it is still valid for this turn (else it is discarded
        and None returned); its user message takes ``message``'s confidence and metrics."""
        self.taken = True
        return self._take(transcript, turn_ctx, message)
