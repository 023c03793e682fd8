"""The providers of the examples in this folder: real ones, or scripted fakes.

With ``LIVEKIT_API_KEY`` set and ``EXAMPLE_PROVIDERS`` not ``fake``, an example gets LiveKit's
inference gateway models (``"openai/gpt-4.1-mini"``, ``"deepgram/nova-3"``, …) and Silero's
VAD, the way LiveKit's own examples write them. Otherwise (and always in CI) it gets the fakes
of ``agents_trio.testing.livekit_fakes``: plugins built on LiveKit's own base classes, so the
same objects run on LiveKit Agents and on agents_trio, and the scripted LLM below answers
each example's conversation in ``*.lines`` the same way on both.

This file has no runtime import: both runtimes' versions of an example import it unchanged.
"""

from __future__ import annotations

import os
from typing import Any

SCRIPTS: dict[str, dict[str, Any]] = {}


def _script(name: str, replies: dict[str, Any]) -> None:
    SCRIPTS[name] = replies


def session_providers(example: str) -> dict[str, Any]:
    """Keyword arguments for ``AgentSession(...)``: ``llm`` (and ``stt``, ``tts``, ``vad`` for
    the real providers)."""
    if os.environ.get("LIVEKIT_API_KEY") and os.environ.get("EXAMPLE_PROVIDERS") != "fake":
        from livekit.plugins import silero

        return {"llm": "openai/gpt-4.1-mini", "stt": "deepgram/nova-3",
                "tts": "cartesia/sonic-2", "vad": silero.VAD.load()}
    from agents_trio.testing.livekit_fakes import FakePluginLLM

    return {"llm": FakePluginLLM(_replies(example), default="Go on.", ttft=0.01,
                                 word_delay=0.0)}


def _replies(example: str) -> dict[str, Any]:
    from agents_trio.testing.livekit_fakes import tool_call

    call = tool_call
    scripts: dict[str, dict[str, Any]] = {
        "weather_tools": {
            "What's the weather in Paris?": call("lookup_weather", city="Paris"),
            "sunny, 21 degrees": "It is sunny and 21 degrees in Paris.",
            "And in Oslo?": call("lookup_weather", city="Oslo"),
            "light snow, -3 degrees": "Light snow in Oslo, minus three.",
            "Which cities did I ask about?": call("cities_asked"),
            "Paris, Oslo": "You asked about Paris and Oslo.",
        },
        "front_desk_handoff": {
            "Hi, I'm Ada.": call("record_name", name="Ada"),
            "name recorded: Ada": "Nice to meet you, Ada. How can I help?",
            "I have a question about my invoice.": call("transfer_to_billing"),
            "What was my total in March?": call("invoice_total", month="March"),
            "transferring to billing": "One moment, I am putting you through.",
            "Ada's invoice for March: 42 euros": "Your March invoice came to 42 euros.",
        },
        "hotel_intake": {
            "I'd like to check in.": call("check_in"),
            "booked for 3 nights, confirmation sent to ada@example.com":
                "You are booked for 3 nights; the confirmation went to ada@example.com.",
            "My email is ada@example.com": call("update_email_address",
                                                email="ada@example.com"),
            "Three nights.": call("record_nights", nights=3),
        },
        "modal_instructions": {
            "How far is 42 km in miles?": call("km_to_miles", km=42),
            "26.1 miles": "42 km is 26.1 miles.",
            "And 30 degrees Celsius?": call("celsius_to_fahrenheit", celsius=30),
            "86 F": "30 degrees Celsius is 86 F.",
        },
    }
    return scripts[example]
