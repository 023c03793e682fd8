"""``agents_trio.beta``: LiveKit's ``livekit.agents.beta``: ``EndCallTool``, ``workflows``,
``toolsets`` and ``Instructions``."""

from __future__ import annotations

from ..instructions import Instructions
from ..prebuilt import EndCallTool
from . import toolsets, workflows

__all__ = ["EndCallTool", "Instructions", "toolsets", "workflows"]
