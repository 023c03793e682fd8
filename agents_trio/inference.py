"""``agents_trio.inference``: LiveKit's ``livekit.agents.inference`` models, adapted.

``LLM``, ``STT``, ``TTS`` and ``VAD`` take the constructor parameters of LiveKit's classes of
the same names and are Trio models as they are (``AgentSession(llm=inference.LLM(...))``);
``llm="openai/gpt-4.1-mini"``, ``stt="deepgram/nova-3"`` and ``tts="cartesia/sonic-3:…"``
resolve to them. LiveKit's audio end-of-turn detector (``TurnDetector``) is not supported
(see docs/livekit-names.md). Needs ``livekit-agents``.
"""

from __future__ import annotations

from .plugins.inference import LLM, STT, TTS, VAD, llm_from_model_string

__all__ = ["LLM", "STT", "TTS", "VAD", "llm_from_model_string"]
