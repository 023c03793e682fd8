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
                  "realtime_generation", "recognition", "in_flight")


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
