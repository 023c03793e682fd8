"""Errors a RemoteSession raises; all derive from ``AgentsTrioError``."""

from __future__ import annotations

from .._errors import AgentsTrioError, SessionClosedError

_CLOSED_CODES = frozenset({"session_closed", "host_closing"})


class RemoteSessionError(AgentsTrioError):
    """The host answered a request with an error.

    Attributes:
        message: What went wrong, as the host said it (for a failed turn, the model's error).
        code: The wire error code (``run_failed``, ``not_ready``, ``bad_request``, ...).
        error_type: The class name of the error on the host, when there was one.
    """

    def __init__(self, message: str, *, code: str = "internal_error",
                 error_type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.error_type = error_type

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class RemoteConnectionError(RemoteSessionError):
    """The connection to the host could not be opened, broke, or was closed."""


class RemoteSessionClosedError(RemoteSessionError, SessionClosedError):
    """The remote session (or its host) closed before the request was answered."""


def error_from_code(message: str, code: str, error_type: str | None = None,
                    *, connection: bool = False) -> RemoteSessionError:
    """The exception for a wire error ``code``; ``connection`` marks a connection-level
    failure (the connection is gone)."""
    if code in _CLOSED_CODES:
        return RemoteSessionClosedError(message, code=code, error_type=error_type)
    cls = RemoteConnectionError if connection else RemoteSessionError
    return cls(message, code=code, error_type=error_type)
