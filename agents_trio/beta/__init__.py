"""``agents_trio.beta``: LiveKit's ``livekit.agents.beta``; so far its ``workflows``."""

from __future__ import annotations

from . import workflows

__all__ = ["workflows"]
