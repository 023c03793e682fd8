"""The scripted providers that stand in for the network ones of the ported agents.

Each ported agent imports its providers from here instead of ``livekit.plugins`` (openai,
deepgram, cartesia, silero): the fakes of ``agents_trio.testing.livekit_fakes``, built on
LiveKit Agents' own base classes, so the same agent file runs on agents_trio and, with its
``agents_trio`` imports changed back to ``livekit.agents``, on LiveKit Agents itself. This
module has no runtime import at module level, so both versions of an agent import it as it is.

A script is a list of replies, answered in order, one per LLM request: a runtime that makes
one request more or fewer than the other shows it in the transcript.
"""

from __future__ import annotations

from typing import Any

SCRIPTS: dict[str, list[Any]] = {}

#: the scripted LLMs made so far, by script name (their ``requests`` are recorded)
MADE: list[tuple[str, Any]] = []


def item_summary(item: Any) -> str:
    """One chat item as a short line (the same for LiveKit's items and this runtime's)."""
    kind = getattr(item, "type", "?")
    if kind == "message":
        return f"{item.role}: {item.text_content or ''}"
    if kind == "function_call":
        return f"call {item.name}({item.arguments})"
    if kind == "function_call_output":
        return f"output {item.name}: {item.output}"
    return kind


def request_log() -> list[tuple[str, list[str]]]:
    """Every LLM request so far: the script's name and its chat items when it was made (the
    runtime may change the context it passed afterwards)."""
    return [(name, items) for name, made in MADE for items in made.snapshots]


def _recording_llm(replies: Any, default: str) -> Any:
    from agents_trio.testing.livekit_fakes import FakePluginLLM

    class RecordingLLM(FakePluginLLM):
        snapshots: list[list[str]]

        def chat(self, *, chat_ctx: Any, **kwargs: Any) -> Any:
            tools = sorted(str(getattr(t, "id", t)) for t in kwargs.get("tools") or [])
            choice = kwargs.get("tool_choice")
            self.snapshots.append([item_summary(i) for i in chat_ctx.items] + [
                f"tools: {', '.join(tools)}",
                f"tool_choice: {choice if isinstance(choice, (str, dict)) else None}"])
            return super().chat(chat_ctx=chat_ctx, **kwargs)

    made = RecordingLLM(replies, default=default, ttft=0.01, word_delay=0.0)
    made.snapshots = []
    return made


def _dump_at_exit() -> None:
    import json
    import os

    path = os.environ.get("PORTED_REQUESTS_FILE")
    if path:
        with open(path, "w") as f:
            json.dump(request_log(), f, indent=1)


import atexit  # noqa: E402

atexit.register(_dump_at_exit)


def call(tool: str, /, **arguments: Any) -> Any:
    from agents_trio.testing.livekit_fakes import tool_call

    return tool_call(tool, arguments)


def llm(script: str, *, default: str = "Anything else?") -> Any:
    """A fresh scripted LLM answering ``SCRIPTS[script]`` in order."""
    made = _recording_llm(list(SCRIPTS[script]), default)
    MADE.append((script, made))
    return made


def keyed_llm(replies: dict[str, Any], *, default: str = "Anything else?") -> Any:
    """A scripted LLM answering by the text of the request's last chat item."""
    from agents_trio.testing.livekit_fakes import FakePluginLLM

    return FakePluginLLM(dict(replies), default=default, ttft=0.01, word_delay=0.0)


def tts() -> Any:
    from agents_trio.testing.livekit_fakes import FakePluginTTS

    return FakePluginTTS(ttfb=0.01, seconds_per_char=0.001)


def stt() -> Any:
    from agents_trio.testing.livekit_fakes import FakePluginSTT

    return FakePluginSTT()


def vad() -> Any:
    from agents_trio.testing.livekit_fakes import FakePluginVAD

    return FakePluginVAD()


def realtime() -> Any:
    from agents_trio.testing.livekit_fakes import FakePluginRealtimeModel

    return FakePluginRealtimeModel()
