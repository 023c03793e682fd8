from __future__ import annotations

import itertools
import uuid

_counter = itertools.count(1)


def short_id(prefix: str) -> str:
    """A short unique id such as ``speech_3f9a1c2b7d4e``."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def now() -> float:
    """The current Trio time, or 0.0 outside a Trio run (e.g. building items in a sync test)."""
    import trio

    try:
        return trio.current_time()
    except RuntimeError:
        return 0.0
