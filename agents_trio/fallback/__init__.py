"""Fallback adapters: several models of one kind tried in order (LiveKit's
``llm.FallbackAdapter``; the STT and TTS ones are not implemented yet)."""

from __future__ import annotations

from .llm import AvailabilityChangedEvent, FallbackAdapter

__all__ = ["AvailabilityChangedEvent", "FallbackAdapter"]
