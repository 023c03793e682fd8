"""RealtimeResponse: receiving one realtime model response, owned by one cancel scope.

A response's messages, text deltas, audio frames and function calls arrive on channels that
the server ends. When that end never comes (an event lost on the way, a reconnect, a plugin
that leaves a stream open), waiting for it held the speech, and every reply queued behind it,
for good. The scope that receives a response therefore ends in one of three ways:

- its streams end (the normal case);
- :meth:`RealtimeResponse.end`: the session reconnected, or a newer turn was scheduled (the
  realtime link calls it); what was received still plays;
- its deadline: nothing arrived for ``stall_timeout`` seconds. The response is then *stalled*
  (``stall_error`` is set when the scope is left) and the speech reports it as an ``error``
  event.
"""

from __future__ import annotations

import trio

from .realtime import RealtimeResponseStalledError


class RealtimeResponse:
    """The scope receiving one response (see the module docstring); enter it with ``with``.

    Args:
        stall_timeout: Seconds without progress after which the response is failed; None
            waits for the server without a bound.
    """

    def __init__(self, *, stall_timeout: float | None) -> None:
        self._stall_timeout = stall_timeout
        self._scope = trio.CancelScope()
        self.ended_by: str | None = None
        self.stall_error: RealtimeResponseStalledError | None = None

    def __enter__(self) -> RealtimeResponse:
        self._scope.__enter__()
        self.progress()
        return self

    def __exit__(self, *exc_info: object) -> bool | None:
        try:
            return self._scope.__exit__(*exc_info)  # type: ignore[arg-type]
        finally:
            if self.ended_by is None and self._scope.cancel_called:
                self.stall_error = RealtimeResponseStalledError(
                    f"the realtime response received nothing for {self._stall_timeout:.1f} s; "
                    "it is failed")

    def progress(self) -> None:
        """Something arrived: the stall deadline starts again."""
        if self._stall_timeout is not None:
            self._scope.deadline = trio.current_time() + self._stall_timeout

    def end(self, reason: str) -> None:
        """Stop receiving (idempotent): the streams count as ended, what arrived still plays.

        A response already past its stall deadline stays stalled.
        """
        if self.ended_by is None and not self._scope.cancel_called:
            self.ended_by = reason
            self._scope.cancel()
