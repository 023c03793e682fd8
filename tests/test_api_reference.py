"""docs/api.md is the complete API reference: what ``docs/tools/api_reference.py`` writes
from every public module's ``__all__`` (regenerate it after changing a public name)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():  # noqa: ANN202 - the script as a module
    spec = importlib.util.spec_from_file_location(
        "api_reference", ROOT / "docs" / "tools" / "api_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_reference_is_current() -> None:
    assert (ROOT / "docs" / "api.md").read_text() == _tool().reference(), (
        "the public API changed: run `python docs/tools/api_reference.py`")


def test_every_public_name_is_in_the_reference() -> None:
    tool = _tool()
    text = (ROOT / "docs" / "api.md").read_text()
    for path, _ in tool.MODULES:
        module = importlib.import_module(path)
        for name in getattr(module, "__all__", []):
            assert f"`{name}`" in text, f"{path}.{name} is not in docs/api.md"
