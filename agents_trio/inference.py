"""``agents_trio.inference``: LiveKit's ``livekit.agents.inference`` models, adapted.

``LLM``, ``STT``, ``TTS``, ``VAD`` and ``TurnDetector`` take the constructor parameters of
LiveKit's classes of the same names and are Trio models as they are
(``AgentSession(llm=inference.LLM(...))``,
``turn_handling={"turn_detection": inference.TurnDetector()}``); ``llm="openai/gpt-4.1-mini"``,
``stt="deepgram/nova-3"`` and ``tts="cartesia/sonic-3:…"`` resolve to them. Needs
``livekit-agents``.
"""

from __future__ import annotations

from .plugins.audio_turn_detector import TurnDetector
from .plugins.inference import LLM, STT, TTS, VAD, llm_from_model_string

__all__ = ["LLM", "STT", "TTS", "TurnDetector", "VAD", "llm_from_model_string"]
