"""What the machine running the benchmark has installed: which runtimes can be measured."""

from __future__ import annotations

import importlib.util


def have_livekit_agents() -> bool:
    """Whether LiveKit Agents (the asyncio side) is importable here."""
    try:
        return importlib.util.find_spec("livekit.agents") is not None
    except (ImportError, ValueError):
        return False


def have_pipecat() -> bool:
    """Whether Pipecat (the third runtime, also on asyncio) is importable here."""
    try:
        return importlib.util.find_spec("pipecat") is not None
    except (ImportError, ValueError):
        return False
