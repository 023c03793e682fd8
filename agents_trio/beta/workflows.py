"""``agents_trio.beta.workflows``: LiveKit's ``livekit.agents.beta.workflows`` names. The
prebuilt tasks (``GetEmailTask``, …) are not implemented yet (docs/livekit-names.md)."""

from __future__ import annotations

from ..workflows import TaskCompletedEvent, TaskGroup, TaskGroupResult

__all__ = ["TaskCompletedEvent", "TaskGroup", "TaskGroupResult"]
