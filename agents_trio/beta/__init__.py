"""``agents_trio.beta``: LiveKit's ``livekit.agents.beta``: ``EndCallTool`` and ``workflows``."""

from __future__ import annotations

from ..prebuilt import EndCallTool
from . import workflows

__all__ = ["EndCallTool", "workflows"]
