"""``agents_trio.beta``: LiveKit's ``livekit.agents.beta``: ``workflows`` and
``Instructions``."""

from __future__ import annotations

from ..instructions import Instructions
from . import workflows

__all__ = ["Instructions", "workflows"]
