"""Print the package's import graph as a Mermaid flowchart (the picture in docs/architecture.md).

    python docs/tools/import_graph.py

Modules of the runtime proper are nodes of their own; each subpackage (io, plugins, remote,
testing, offline, nurseries) is one node. Imports under ``TYPE_CHECKING`` count. Edges are the
transitive reduction: an arrow a → c is left out when a reaches c through other arrows, so the
picture shows the layering rather than every import.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agents_trio"
SUBPACKAGES = ("io", "plugins", "remote", "testing", "offline", "nurseries")


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def module_graph() -> dict[str, set[str]]:
    """Module → the package modules it imports."""
    mods = modules()
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [target] + [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def node_of(module: str) -> str | None:
    """The picture's node for a module; None for the package's ``__init__`` and ``__main__``."""
    parts = module.split(".")[1:]
    if not parts or parts[0] in ("__main__",):
        return None
    if parts[:2] == ["testing", "expect"]:
        return "testing/expect"  # the DSL run_result lends to result.expect: below the session
    if parts[0] in SUBPACKAGES:
        return parts[0] + "/"
    return parts[0]


def grouped_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in module_graph().items():
        source = node_of(module)
        if source is None:
            continue
        graph[source]
        for target in targets:
            node = node_of(target)
            if node is not None and node != source:
                graph[source].add(node)
    return dict(graph)


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


def reduced(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Drop a → c when some other direct target b of a reaches c."""
    out: dict[str, set[str]] = {}
    for source, targets in graph.items():
        indirect = set().union(*(reachable(graph, t) for t in targets)) if targets else set()
        out[source] = {t for t in targets if t not in indirect}
    return out


def mermaid() -> str:
    graph = reduced(grouped_graph())
    ident = {name: name.replace("/", "_pkg_") for name in graph}
    lines = ["flowchart BT"]
    for name in sorted(graph):
        lines.append(f'    {ident[name]}["{name}"]')
    for source in sorted(graph):
        for target in sorted(graph[source]):
            lines.append(f"    {ident[source]} --> {ident[target]}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(mermaid() + "\n")
