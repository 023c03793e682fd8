"""The prebuilt workflow tasks (LiveKit's ``beta.workflows``) and ``EndCallTool``; their
LiveKit paths are ``agents_trio.beta.workflows`` and ``agents_trio.beta``."""

from __future__ import annotations

from .email import GetEmailResult, GetEmailTask

__all__ = ["GetEmailResult", "GetEmailTask"]
