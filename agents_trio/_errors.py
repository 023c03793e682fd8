"""Exceptions of agents_trio; every error the runtime raises derives from AgentsTrioError."""

from __future__ import annotations


class AgentsTrioError(Exception):
    """Base class of the errors raised by agents_trio."""


class ToolError(AgentsTrioError):
    """Raised by a function tool: its message is shown to the LLM as an error output."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StopResponse(AgentsTrioError):
    """Raised from ``on_user_turn_completed`` (or a tool) to skip the reply."""


class APIError(AgentsTrioError):
    """A model provider failed.

    Args:
        message: What went wrong.
        recoverable: False when retrying is pointless; unrecoverable errors count towards
            ``max_unrecoverable_errors``.
    """

    def __init__(self, message: str, *, recoverable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.recoverable = recoverable


class SessionClosedError(AgentsTrioError, RuntimeError):
    """The session closed before the awaited work finished."""
