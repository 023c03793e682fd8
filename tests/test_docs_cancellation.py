"""Every public async API says in its docstring what cancelling it does.

Public: an ``async def`` at module level or in a public class, in a module outside the
package's private modules (``_name.py``, ``_pkg/``), whose name has no leading underscore,
plus ``__aenter__``/``__aexit__`` (for those the class docstring may say it once). The check
is for the word "cancel" in the docstring: what it says is for the reviewer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agents_trio"

# "module path:Qualified.name" -> why it may lack the note. Keep this list short.
ALLOWED_UNDOCUMENTED = {
    # remote/: documented on branch fix12-lkproto
    "remote/demo.py:DemoLLM.chat",
    # remote/: documented on branch fix12-lkproto
    "remote/simulate.py:LocalDriver.agent_id",
    # LLM tools without arguments: the whole docstring is the model's description (the
    # class docstring of WarmTransferTask says what cancelling the transfer does)
    "prebuilt/warm_transfer.py:WarmTransferTask.connect_to_caller",
    "prebuilt/warm_transfer.py:WarmTransferTask.voicemail_detected",
}

_CONTEXT_METHODS = ("__aenter__", "__aexit__")


def _public_modules() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if any(part.startswith("_") and part != "__init__.py" for part in parts):
            continue
        yield path


def _async_apis(path: Path) -> Iterator[tuple[str, ast.AsyncFunctionDef, ast.ClassDef | None]]:
    """(qualified name, function, its class) for each public async function of ``path``."""

    def visit(nodes: list[ast.stmt], cls: ast.ClassDef | None
              ) -> Iterator[tuple[str, ast.AsyncFunctionDef, ast.ClassDef | None]]:
        for node in nodes:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                yield from visit(node.body, node)
            elif isinstance(node, ast.AsyncFunctionDef) and (
                    not node.name.startswith("_") or node.name in _CONTEXT_METHODS):
                name = f"{cls.name}.{node.name}" if cls is not None else node.name
                yield name, node, cls

    yield from visit(ast.parse(path.read_text()).body, None)


def _says_what_cancelling_does(fn: ast.AsyncFunctionDef, cls: ast.ClassDef | None) -> bool:
    doc = ast.get_docstring(fn) or ""
    if fn.name in _CONTEXT_METHODS and cls is not None:
        doc += ast.get_docstring(cls) or ""
    return "cancel" in doc.lower()


def _undocumented() -> dict[str, int]:
    """``path:name`` -> line of each public async API whose docstring lacks the note."""
    found = {}
    for path in _public_modules():
        rel = path.relative_to(PACKAGE).as_posix()
        for name, fn, cls in _async_apis(path):
            if not _says_what_cancelling_does(fn, cls):
                found[f"{rel}:{name}"] = fn.lineno
    return found


def test_public_async_apis_say_what_cancelling_them_does() -> None:
    offenders = {key: line for key, line in _undocumented().items()
                 if key not in ALLOWED_UNDOCUMENTED}
    assert not offenders, (
        "these public async APIs do not say in their docstring what cancelling them does "
        "(add a 'Cancellation: ...' sentence):\n" + "\n".join(
            f"  agents_trio/{key.split(':')[0]}:{line} {key.split(':')[1]}"
            for key, line in sorted(offenders.items())))


def test_allowlist_is_not_stale() -> None:
    """An allowlisted API that is documented now (or gone) must leave the list."""
    stale = sorted(ALLOWED_UNDOCUMENTED - set(_undocumented()))
    assert not stale, f"drop these from ALLOWED_UNDOCUMENTED: {stale}"


def test_the_check_sees_the_apis() -> None:
    """The walk finds the package's public async APIs (guards against a vacuous pass)."""
    names = {f"{path.relative_to(PACKAGE).as_posix()}:{name}"
             for path in _public_modules() for name, _, _ in _async_apis(path)}
    assert len(names) > 150
    assert "session.py:AgentSession.aclose" in names
    assert "io/local_audio.py:MicrophoneInput.__aexit__" in names
