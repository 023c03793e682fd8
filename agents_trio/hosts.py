"""What an activity and its helpers need from the session that runs them.

``ActivityHost`` is the session as an activity sees it: the user-facing session
(``SessionView``) plus the conversation it shares with every other activity, the outputs,
the session-wide options and registries. ``AgentSession`` satisfies it; the activity and its
helpers (generation, interruption, preemptive generation, user turns, realtime) are typed
against it and never import the session, so the dependencies point one way:
``… ← activity ← session``.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from .agent import Agent, SessionView
from .chat import AgentHandoff
from .conversation import Conversation
from .events import AgentMetrics
from .floor import Floor
from .in_flight import InlineTaskStack, RunningTools
from .io.audio import AudioOutput, TextOutput
from .keyterm_detection import STTContext
from .options import TurnHandling
from .recognition import AudioRecognition, EndOfTurnInfo
from .speech_handle import SpeechHandle
from .text_transforms import TextTransform
from .tool_handling import AsyncToolOptions

A = TypeVar("A", contravariant=True)


class SessionOutputs(Protocol):
    """``session.output``: where the agent's voice and transcription go."""

    @property
    def audio(self) -> AudioOutput | None: ...

    @property
    def transcription(self) -> TextOutput | None: ...

    @property
    def active_audio(self) -> AudioOutput | None: ...

    @property
    def active_transcription(self) -> TextOutput | None: ...


class ActivityHost(SessionView, Protocol[A]):
    """The session as its activities (of type ``A``) see it."""

    @property
    def conversation(self) -> Conversation: ...

    @property
    def output(self) -> SessionOutputs: ...

    @property
    def stt_context(self) -> STTContext: ...

    @property
    def turn_handling_overrides(self) -> dict[str, object]: ...

    @property
    def max_tool_steps(self) -> int: ...

    @property
    def async_tool_options(self) -> AsyncToolOptions: ...

    @property
    def activity(self) -> object:
        """The current agent's activity (the innermost AgentTask's while one is awaited)."""
        ...

    @property
    def min_consecutive_speech_delay(self) -> float: ...

    @property
    def use_tts_aligned_transcript(self) -> bool | None: ...

    @property
    def close_grace(self) -> float: ...

    @property
    def audio_write_timeout(self) -> float | None: ...

    @property
    def tts_text_transforms(self) -> list[TextTransform]: ...

    @property
    def running_tools(self) -> RunningTools: ...

    @property
    def inline_tasks(self) -> InlineTaskStack: ...

    @property
    def recognition(self) -> AudioRecognition | None: ...

    @property
    def closing(self) -> bool:
        """The session is closing or closed: nothing new may start."""
        ...

    @property
    def aec_warmup_active(self) -> bool: ...

    def emit_metrics(self, metrics: AgentMetrics) -> None: ...

    def hold_user_turn(self, info: EndOfTurnInfo) -> None:
        """Keep a user turn that ended while the floor changes hands: the next activity
        the session points at answers it."""
        ...

    def switch_current(self, activity: A, handoff: AgentHandoff | None = None, *,
                       old_agent: object = None) -> None:
        """Point the session at ``activity`` (an AgentTask starting or returning)."""
        ...

    @property
    def floor(self) -> Floor: ...

    async def wait_for_idle(self) -> object:
        """The current activity, once nothing is in flight (see ``AgentSession``).

        Cancellation: a checkpoint only.
        """
        ...


class ActivityBasics(Protocol):
    """What every helper of an activity reads from it: the session it runs in, its agent and
    its resolved turn-handling options. The helpers' own protocols (``GenerationHost``,
    ``PreemptiveHost``, ``RealtimeHost`` …) extend it with what each needs besides."""

    @property
    def session(self) -> ActivityHost[Any]: ...

    @property
    def agent(self) -> Agent: ...

    @property
    def options(self) -> TurnHandling: ...


class TurnTaking(Protocol):
    """Whether the activity takes a user turn now, and the speech it is playing."""

    @property
    def current_speech(self) -> SpeechHandle | None: ...

    @property
    def accepts_turns(self) -> bool: ...

    @property
    def takes_new_turns(self) -> bool: ...
