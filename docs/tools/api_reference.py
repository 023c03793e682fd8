"""Write the API reference (docs/api.md) from the package's public names and docstrings.

    python docs/tools/api_reference.py            # rewrites docs/api.md

Every name in the ``__all__`` of the public modules below is listed with its signature and
the first paragraph of its docstring; a class also lists its public methods and properties.
A name re-exported by several modules is described once, where it is first listed, and the
later modules point to it. ``tests/test_api_reference.py`` fails when docs/api.md is not
what this script writes, so the reference stays complete.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "api.md"

#: the public modules, in the order the reference presents them
MODULES = (
    ("agents_trio", "The runtime: sessions, agents, tasks, tools, chat items, events, errors."),
    ("agents_trio.voice", "LiveKit's `livekit.agents.voice`."),
    ("agents_trio.voice.io", "LiveKit's `livekit.agents.voice.io`: session input and output, "
     "TimedString."),
    ("agents_trio.llm", "LiveKit's `livekit.agents.llm`: chat context, tools, LLM protocols."),
    ("agents_trio.stt", "LiveKit's `livekit.agents.stt`."),
    ("agents_trio.tts", "LiveKit's `livekit.agents.tts`."),
    ("agents_trio.vad", "LiveKit's `livekit.agents.vad`."),
    ("agents_trio.metrics", "LiveKit's `livekit.agents.metrics`: metrics and usage."),
    ("agents_trio.mcp", "MCP servers as tool sources (`mcp_servers=`; LiveKit's `llm.mcp`)."),
    ("agents_trio.room_io", "LiveKit's `livekit.agents.room_io`: a session's room I/O."),
    ("agents_trio.job", "The job context an entrypoint receives."),
    ("agents_trio.cli", "`cli.run_app(server)`: console, dev, start, connect."),
    ("agents_trio.inference", "LiveKit's inference-gateway models (model strings)."),
    ("agents_trio.beta", "LiveKit's `livekit.agents.beta`."),
    ("agents_trio.beta.workflows", "TaskGroup and the prebuilt tasks."),
    ("agents_trio.beta.toolsets", "Tool search: ToolSearchToolset, ToolProxyToolset."),
    ("agents_trio.turn_options", "The `turn_handling=` option types."),
    ("agents_trio.audio_turn", "Audio end-of-turn detectors (`inference.TurnDetector`): protocol and rules."),
    ("agents_trio.plugins", "LiveKit provider plugins as Trio models (`adapt()`)."),
    ("agents_trio.worker", "Worker mode: LiveKit's AgentServer running Trio jobs."),
    ("agents_trio.remote", "Remote sessions (msgpack protocol) and their hosts."),
    ("agents_trio.testing", "Virtual-time harness, fakes, adversarial conversations."),
    ("agents_trio.io", "Audio and text transports, the trio-asyncio bridge."),
    ("agents_trio.blocking", "Running a blocking model off the Trio loop."),
    ("agents_trio.offline", "Offline voice models (espeak-ng, PocketSphinx, Silero VAD)."),
    ("agents_trio.nurseries", "Structured-concurrency building blocks."),
)


def first_paragraph(obj: object) -> str:
    # a class's own docstring only (not one inherited from a base such as msgspec.Struct)
    own = vars(obj).get("__doc__") if inspect.isclass(obj) else None
    doc = inspect.cleandoc(own) if own else ("" if inspect.isclass(obj) else
                                             inspect.getdoc(obj) or "")
    para = doc.strip().split("\n\n", 1)[0]
    return " ".join(para.split())


def signature(obj: Any) -> str:  # noqa: ANN401 - any public object
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""
    # default values that print an address are not stable between runs
    return re.sub(r" at 0x[0-9a-f]+", "", sig)


def kind(obj: object) -> str:
    if inspect.isclass(obj):
        if issubclass(obj, enum.Enum):
            return "enum"
        if issubclass(obj, BaseException):
            return "exception"
        return "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return "async function" if inspect.iscoroutinefunction(obj) else "function"
    if inspect.ismodule(obj):
        return "module"
    return "value"


def class_members(cls: type) -> list[str]:
    lines = []
    if issubclass(cls, enum.Enum):
        members = ", ".join(f"`{m.name}`" for m in cls)
        return [f"  - members: {members}"]
    for name, member in sorted(vars(cls).items()):
        if name.startswith("_") and name not in ("__aenter__", "__await__"):
            continue
        if isinstance(member, property):
            lines.append(f"  - `{name}` (property): {first_paragraph(member)}".rstrip(": "))
        elif inspect.isfunction(member) or isinstance(member, (staticmethod, classmethod)):
            func = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            prefix = "async " if inspect.iscoroutinefunction(func) else ""
            text = first_paragraph(func)
            lines.append(f"  - `{prefix}{name}{signature(func)}`" + (f": {text}" if text else ""))
    return lines


def describe(path: str, name: str, obj: Any) -> list[str]:  # noqa: ANN401
    what = kind(obj)
    head = f"- **`{name}`** ({what})"
    if what in ("class", "exception", "enum"):
        sig = signature(obj) if what == "class" else ""
        head += f" `{name}{sig}`" if sig and sig != "()" else ""
    elif "function" in what:
        head += f" `{name}{signature(obj)}`"
    text = first_paragraph(obj) if what != "value" else ""
    lines = [head + (f": {text}" if text else "")]
    if inspect.isclass(obj):
        lines += class_members(obj)
    return lines


def reference() -> str:
    out = ["# API reference", "",
           "Generated by `python docs/tools/api_reference.py` from the package's public names",
           "(each public module's `__all__`) and their docstrings; a test keeps it current.",
           "LiveKit's names map to these as `docs/livekit-names.md` says; the behaviour is in",
           "the README, `docs/cancellation.md` and `docs/architecture.md`.", ""]
    seen: dict[int, str] = {}
    for path, summary in MODULES:
        module = importlib.import_module(path)
        names = sorted(getattr(module, "__all__", []), key=str.lower)
        out += [f"## `{path}`", "", summary, ""]
        pointers = []
        for name in names:
            obj = getattr(module, name)
            key = id(obj)
            if key in seen and not isinstance(obj, (str, int, float, bool)) and obj is not None:
                pointers.append(f"`{name}` ({seen[key]})")
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj):
                seen[key] = f"see `{path}`"
            out += describe(path, name, obj)
        if pointers:
            out += ["", "Also here: " + ", ".join(pointers) + "."]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    OUT.write_text(reference())
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
