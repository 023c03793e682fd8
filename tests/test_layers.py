"""The package's import graph: no circle, and the core's lower layers never import the
activity or the session (they are typed against the protocols in ``hosts`` and ``agent``)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agents_trio"

# modules an activity and its helpers are built from: none may import activity or session
BELOW_ACTIVITY = ("chat", "models", "events", "options", "tools", "run_context", "run_result",
                  "speech_handle", "conversation", "agent", "hosts", "agent_state",
                  "generation", "interruption", "preemptive", "user_turns", "realtime_link",
                  "realtime_generation", "recognition", "in_flight", "usage", "turn_metrics",
                  "chat_format")


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


def _graph() -> dict[str, set[str]]:
    """Module → the package modules it imports (``TYPE_CHECKING`` imports included)."""
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for candidate in [target] + [f"{target}.{a.name}" for a in node.names]:
                    if candidate in mods and candidate != name:
                        graph[name].add(candidate)
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names
                                   if a.name in mods and a.name != name)
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_import_circle() -> None:
    graph = _graph()
    circular = sorted(m for m in list(graph) if m in _reachable(graph, m))
    assert circular == [], f"modules on an import circle: {circular}"


def test_activity_helpers_do_not_import_activity_or_session() -> None:
    graph = _graph()
    for short in BELOW_ACTIVITY:
        reached = _reachable(graph, f"agents_trio.{short}")
        higher = reached & {"agents_trio.activity", "agents_trio.session", "agents_trio"}
        assert higher == set(), f"agents_trio.{short} reaches {sorted(higher)}"


# The package's layers, lowest first (docs/architecture.md draws them). A module may import
# from its own layer and the ones below; entry points (demo, job, worker, remote/, testing/…)
# sit above them all.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("chat", "chat_format", "events", "models", "realtime", "options", "text_transforms", "floor",
     "run_events", "turn_options", "usage", "_errors", "_ids", "_iterators", "nurseries",
     "instructions", "deprecated_turn_options", "tokenize", "tool_mocks", "utils",
     "model_capabilities", "audio_turn", "stt_context", "tool_handling", "speech_args"),
    ("io", "plugins", "offline", "blocking", "recognition_streams", "realtime_response",
     "realtime_sync",
     "tools", "tool_schema", "tool_calls", "tool_events", "toolsets", "async_toolset", "mcp",
     "testing.expect", "model_resolution", "chat_summary", "fallback", "keyterm_detection",
     "stt_stream_adapter"),
    ("hosts", "conversation", "agent", "run_context", "cancel_tools", "run_result",
     "speech_handle", "fillers",
     "in_flight", "recognition"),
    ("generation", "realtime_generation", "interruption", "preemptive", "user_turns",
     "realtime_link", "agent_state", "turn_metrics", "turn_limit"),
    ("background_tools", "session_scope", "activity", "agent_task", "workflows", "manual_turns",
     "prebuilt._capture", "prebuilt.email", "prebuilt.address", "prebuilt.phone", "prebuilt.dob",
     "prebuilt.name", "prebuilt.credit_card"),
    ("session", "recognition_router"),
)


def _layer(module: str) -> int:
    relative = module.removeprefix("agents_trio").removeprefix(".")
    for level, names in enumerate(LAYERS):
        if any(relative == n or relative.startswith(n + ".") for n in names):
            return level
    return len(LAYERS)  # an entry point


def test_no_layer_imports_a_higher_one() -> None:
    upward = sorted(f"{source} -> {target}"
                    for source, targets in _graph().items() for target in targets
                    if _layer(target) > _layer(source))
    assert upward == []


def test_the_architecture_page_shows_the_current_import_graph() -> None:
    import importlib.util
    tool = PACKAGE.parent / "docs" / "tools" / "import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", tool)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    assert f"```mermaid\n{module.mermaid()}\n```" in page, (
        "the import graph changed: paste `python docs/tools/import_graph.py` into "
        "docs/architecture.md")
