"""``agents_trio.beta.workflows``: LiveKit's ``livekit.agents.beta.workflows`` names."""

from __future__ import annotations

from ..prebuilt import GetEmailResult, GetEmailTask
from ..workflows import TaskCompletedEvent, TaskGroup, TaskGroupResult

__all__ = ["GetEmailResult", "GetEmailTask", "TaskCompletedEvent", "TaskGroup",
           "TaskGroupResult"]
