"""``agents_trio.plugins`` exports its public names (like tests/test_exports.py does for the
package), and importing agents_trio alone neither needs livekit-agents nor patches asyncio."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

import agents_trio.plugins


def test_plugins_exports_every_public_name() -> None:
    module = agents_trio.plugins
    public = {n for n, v in vars(module).items()
              if not n.startswith("_") and not isinstance(v, types.ModuleType)
              and getattr(v, "__module__", module.__name__).startswith("agents_trio")}
    assert public - set(module.__all__) == set()
    assert all(hasattr(module, n) for n in module.__all__)


def test_importing_agents_trio_leaves_asyncio_alone() -> None:
    code = ("import sys, agents_trio; "
            "print('trio_asyncio' in sys.modules, 'livekit.agents' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]
