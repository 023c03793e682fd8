from __future__ import annotations

import itertools
import random

_counter = itertools.count(1)


def random_hex(digits: int) -> str:
    """``digits`` random hex digits, for ids.

    From the ``random`` module's generator rather than ``uuid4``: ids are made several times
    per turn, and ``uuid4`` asks the kernel for randomness each time (a system call). The
    generator is seeded from the kernel's randomness and reseeded in a forked child, so
    processes do not repeat each other's ids. Not for secrets.
    """
    return f"{random.getrandbits(4 * digits):0{digits}x}"


def short_id(prefix: str) -> str:
    """A short unique id such as ``speech_3f9a1c2b7d4e``."""
    return f"{prefix}_{random_hex(12)}"


def now() -> float:
    """The current Trio time, or 0.0 outside a Trio run (e.g. building items in a sync test)."""
    import trio

    try:
        return trio.current_time()
    except RuntimeError:
        return 0.0
