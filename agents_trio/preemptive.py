"""Preemptive generation (reference §6): start the reply at the final transcript, before the
end of turn is decided, and use it only if nothing it depended on changed.

It never starts while a tool of the activity is running (the running tools are a fact of the
activity's structure: each one is registered for exactly the time its task runs), and a tool
starting cancels it, so no LLM request can hold a function call without its output.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from .agent import Agent
from .chat import ChatContext, ChatMessage
from .hosts import ActivityHost
from .interruption import words
from .options import TurnHandling
from .speech_handle import SpeechHandle



class PreemptiveHost(Protocol):
    """What preemptive generation needs from its activity."""

    @property
    def session(self) -> ActivityHost[Any]: ...

    @property
    def agent(self) -> Agent: ...

    @property
    def options(self) -> TurnHandling: ...

    @property
    def llm(self) -> object: ...

    @property
    def current_speech(self) -> SpeechHandle | None: ...

    @property
    def accepts_turns(self) -> bool: ...

    @property
    def tools_running(self) -> bool: ...

    def tool_names(self) -> list[str]: ...

    def generate_reply(self, *, user_message: ChatMessage | None = None,
                       chat_ctx: ChatContext | None = None, instructions: str | None = None,
                       tool_choice: str | None = None, allow_interruptions: bool | None = None,
                       schedule: bool = True) -> SpeechHandle: ...


class _Attempt(msgspec.Struct, kw_only=True):
    handle: SpeechHandle
    user_message: ChatMessage
    transcript: str
    snapshot: ChatContext
    tool_names: list[str]


class PreemptiveGeneration:
    """At most one preemptive reply per activity."""

    def __init__(self, activity: PreemptiveHost) -> None:
        self._activity = activity
        self._attempt: _Attempt | None = None
        self._attempts = 0

    def reset_attempts(self) -> None:
        self._attempts = 0

    def start(self) -> None:
        activity = self._activity
        opts = activity.options.preemptive_generation
        recognition = activity.session.recognition
        current = activity.current_speech
        if (not opts.enabled or not activity.accepts_turns or activity.llm is None
                or recognition is None or (current is not None and not current.interrupted)
                or activity.tools_running
                or recognition.user_speech_duration > opts.max_speech_duration
                or self._attempts >= opts.max_retries):
            return
        transcript = recognition.transcript
        self.cancel()
        self._attempts += 1
        message = ChatMessage(role="user", content=[transcript])
        snapshot = activity.agent.live_chat_ctx.copy()
        handle = activity.generate_reply(user_message=message, chat_ctx=snapshot,
                                         schedule=False)
        self._attempt = _Attempt(handle=handle, user_message=message, transcript=transcript,
                                 snapshot=snapshot, tool_names=activity.tool_names())

    def take(self, transcript: str, turn_ctx: ChatContext) -> SpeechHandle | None:
        """The preemptive reply, if it is still valid for this turn; else cancel it."""
        attempt, self._attempt = self._attempt, None
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
        return attempt.handle

    def cancel(self) -> None:
        attempt, self._attempt = self._attempt, None
        if attempt is not None:
            attempt.handle.interrupt(force=True)
