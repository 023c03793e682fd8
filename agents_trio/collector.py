"""The cyclic garbage collector in a process that hosts many sessions.

CPython's collector starts a young collection every 700 net allocations of container objects
(its default ``gc.get_threshold()[0]``) and promotes what survives two of them to the oldest
generation. A process running hundreds of sessions allocates so fast that everything living
longer than a fraction of a second (a speech, its tasks and cancel scopes, a turn's messages) is
promoted, dies there, and brings on a full collection: a pause of the whole process that grows
with the number of sessions, during which every turn in flight waits. Measured with the
benchmark on a 2-vCPU machine: with 350 sessions, five full collections of up to 118 ms in a
26 s run and a turn p99 of 297 ms; with the young threshold at 5,000, no full collection in the
run, the longest pause 25-30 ms and turn p99 53-70 ms.

:func:`tune_collector_for_sessions` raises the young threshold. The job host
(:class:`agents_trio.job_host.JobHost`, worker mode) applies it when it starts; a process that
runs sessions by itself may call it once at start-up.
"""

from __future__ import annotations

import gc

__all__ = ["SESSION_HOST_YOUNG_THRESHOLD", "check_young_threshold", "tune_collector_for_sessions"]

SESSION_HOST_YOUNG_THRESHOLD = 5000
"""Net container allocations between two young collections in a session host (CPython's
default is 700)."""


def tune_collector_for_sessions(young_threshold: int = SESSION_HOST_YOUNG_THRESHOLD
                                ) -> tuple[int, int, int]:
    """Raise the collector's young-generation threshold to ``young_threshold`` (the other two
    thresholds are kept). A threshold the process set higher is kept, and so is a collector
    turned off with ``gc.set_threshold(0)``: this never makes collections more frequent.

    Returns:
        The thresholds before the call: ``gc.set_threshold(*previous)`` restores them.

    Raises:
        ValueError: ``young_threshold`` is not a positive integer.
    """
    check_young_threshold(young_threshold, "young_threshold")
    previous = gc.get_threshold()
    young, *older = previous
    if 0 < young < young_threshold:
        gc.set_threshold(young_threshold, *older)
    return previous


def check_young_threshold(value: object, name: str) -> None:
    """Raises ValueError, naming the argument ``name``, unless ``value`` is a positive int."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
