"""What room I/O uses of a session: the ports it plugs its audio and text into, and the few
calls it makes (``on``/``off``, ``shutdown``, ``interrupt``, ``generate_reply``).

``io`` never imports the session: ``AgentSession`` satisfies :class:`RoomSession`
structurally, and so does any object with this surface (a test double, a remote proxy).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..events import CloseReason
from .audio import AudioInput, AudioOutput, TextOutput

__all__ = ["ReplyHandle", "RoomSession", "SessionInputPort", "SessionOutputPort"]


class SessionInputPort(Protocol):
    """``session.input``: where the user's audio comes from."""

    audio: AudioInput | None


class SessionOutputPort(Protocol):
    """``session.output``: where the agent's voice and transcription go."""

    audio: AudioOutput | None
    transcription: TextOutput | None


class ReplyHandle(Protocol):
    """A reply being generated (``AgentSession.generate_reply`` returns a ``SpeechHandle``)."""

    def add_done_callback(self, callback: Callable[[Any], object]) -> None: ...

    def remove_done_callback(self, callback: Callable[[Any], object]) -> None: ...


class RoomSession(Protocol):
    """The session as room I/O sees it."""

    @property
    def input(self) -> SessionInputPort: ...

    @property
    def output(self) -> SessionOutputPort: ...

    @property
    def agent_state(self) -> str: ...

    def on(self, name: str, callback: Callable[[Any], object]) -> object: ...

    def off(self, name: str, callback: Callable[[Any], object]) -> None: ...

    def shutdown(self, *, drain: bool = ..., reason: CloseReason = ...) -> None: ...

    def interrupt(self) -> Awaitable[object]: ...

    def generate_reply(self, *, user_input: str | None = ...) -> ReplyHandle: ...
