"""The agent's state (``initializing``, ``listening``, ``thinking``, ``speaking``) as one
activity moves it: the one place that decides the transitions.

The activity and its interruption logic report what happened (a reply was scheduled, its
playout started, its generation finished, the speech ended, a false interruption paused or
resumed the output); ``AgentStateRules`` decides the state from that and from the activity's
facts (the current speech, pending replies, running tools), and writes it to the
conversation, which emits ``agent_state_changed``. The session itself only moves the state
at its own start (``listening``) and close (back to ``initializing``).
"""

from __future__ import annotations

from typing import Protocol

from .conversation import Conversation
from .events import AgentState
from .speech_handle import SpeechHandle


class AgentStateFacts(Protocol):
    """What the rules read from the activity."""

    @property
    def current_speech(self) -> SpeechHandle | None: ...

    @property
    def tools_running(self) -> bool: ...

    @property
    def speech_scheduled(self) -> bool:
        """A speech of the activity is scheduled and not done."""
        ...

    def reply_pending(self, *, exclude: SpeechHandle | None = None) -> bool:
        """A scheduled generate_reply has not finished its generation yet."""
        ...


class AgentStateRules:
    """Decides the agent's state for one activity."""

    def __init__(self, conversation: Conversation, facts: AgentStateFacts) -> None:
        self._conversation = conversation
        self._facts = facts

    @property
    def value(self) -> AgentState:
        return self._conversation.agent_state

    def _set(self, state: AgentState) -> None:
        self._conversation.set_agent_state(state)

    def on_scheduled(self, handle: SpeechHandle) -> None:
        """A speech was scheduled: a reply (not a ``say``) makes the agent think."""
        if handle.source != "say" and not handle.interrupted:
            self._set("thinking")

    def on_playback_started(self, handle: SpeechHandle | None = None) -> None:
        """The output started playing (``handle``'s text, or audio of the current speech)."""
        current = self._facts.current_speech
        if current is not None and (handle is None or current is handle):
            self._set("speaking")

    def on_generation_finished(self, handle: SpeechHandle, *, tools_busy: bool) -> None:
        """``handle``'s generation step ended; ``tools_busy``: its tools still run."""
        state = self.value
        if tools_busy and state in ("speaking", "thinking"):
            self._set("thinking")
        elif state == "speaking":
            self._set("listening")
        elif state == "thinking" and not self._facts.reply_pending(exclude=handle):
            self._set("listening")

    def on_speech_finished(self) -> None:
        """A speech ended (tool rounds included): thinking stops when nothing is left."""
        facts = self._facts
        if (self.value == "thinking" and facts.current_speech is None
                and not facts.reply_pending() and not facts.tools_running
                and not facts.speech_scheduled):
            self._set("listening")

    def on_false_interruption_paused(self) -> None:
        """The user's voice paused the output: the agent listens (the pause keeps the state
        to restore if it turns out to be a false interruption)."""
        self._set("listening")

    def on_false_interruption_resumed(self, saved: AgentState) -> None:
        """The output resumes after a false interruption: back to the state it had."""
        self._set(saved)
