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
    """A model provider failed (LiveKit's ``APIError``, same parameters and attributes).

    Args:
        message: What went wrong.
        body: The provider's response body, if any.
        retryable: False when retrying is pointless; errors that are not retryable count
            towards ``max_unrecoverable_errors``. Unlike LiveKit (where it defaults to
            True), a bare ``APIError`` defaults to not retryable here: the session treats it
            as the provider's final word. ``recoverable`` is the older spelling, kept.
    """

    def __init__(self, message: str, *, body: object | None = None,
                 retryable: bool | None = None, recoverable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body
        self.retryable = bool(retryable if retryable is not None else recoverable)

    @property
    def recoverable(self) -> bool:
        """The same as ``retryable`` (this runtime's first name for it)."""
        return self.retryable

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.message!r}, body={self.body!r}, "
                f"retryable={self.retryable!r})")


class APIStatusError(APIError):
    """The provider answered with an error status (LiveKit's ``APIStatusError``).

    As in LiveKit, a 4xx status other than 408, 429 and 499 is never retryable, whatever
    ``retryable`` says; otherwise ``retryable`` defaults to True.
    """

    def __init__(self, message: str, *, status_code: int = -1, request_id: str | None = None,
                 body: object | None = None, retryable: bool | None = None) -> None:
        if retryable is None:
            retryable = True
        if 400 <= status_code < 500 and status_code not in (408, 429, 499):
            retryable = False
        super().__init__(message, body=body, retryable=retryable)
        self.status_code = status_code
        self.request_id = request_id

    def __str__(self) -> str:
        parts = [f"message={self.message!r}", f"status_code={self.status_code}",
                 f"retryable={self.retryable}"]
        if self.request_id:
            parts.append(f"request_id={self.request_id}")
        if self.body:
            parts.append(f"body={self.body}")
        return ", ".join(parts)


class APIConnectionError(APIError):
    """The provider could not be reached (LiveKit's ``APIConnectionError``; retryable by
    default)."""

    def __init__(self, message: str = "Connection error.", *, retryable: bool = True) -> None:
        super().__init__(message, body=None, retryable=retryable)


class APITimeoutError(APIConnectionError):
    """The provider did not answer in time (LiveKit's ``APITimeoutError``; retryable by
    default)."""

    def __init__(self, message: str = "Request timed out.", *, retryable: bool = True) -> None:
        super().__init__(message, retryable=retryable)


class SessionClosedError(AgentsTrioError, RuntimeError):
    """The session closed before the awaited work finished."""
