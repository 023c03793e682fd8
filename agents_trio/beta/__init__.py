"""``agents_trio.beta``: LiveKit's ``livekit.agents.beta``: ``EndCallTool``, ``workflows`` and
``Instructions``."""

from __future__ import annotations

from ..instructions import Instructions
from ..prebuilt import EndCallTool
from . import workflows

__all__ = ["EndCallTool", "Instructions", "workflows"]
