"""The agents in ``examples/two_runtimes`` run on both runtimes with the same transcript.

Each example is written in LiveKit Agents' idioms (``AgentServer``, ``cli.run_app``,
``session.start(room=ctx.room)``, providers passed as objects). On agents_trio it runs as a
user runs it, ``python EXAMPLE console --text`` with the lines of ``EXAMPLE.lines`` piped in;
on LiveKit Agents the same file with its ``agents_trio`` imports changed to
``livekit.agents`` (nothing else) runs on LiveKit's own console worker
(``livekit_text_console.py``). Both must print ``EXAMPLE.transcript``. The providers are the
fakes of ``agents_trio.testing.livekit_fakes`` (LiveKit's base classes), scripted in
``examples/two_runtimes/providers.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("livekit.agents")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "two_runtimes"
DRIVER = Path(__file__).resolve().parent / "livekit_text_console.py"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.transcript"))

IMPORT = re.compile(r"^(from|import) agents_trio(?=[\s.])")


def to_livekit(source: str) -> str:
    """The example with its agents_trio imports pointing at livekit.agents (the testing
    fakes, ``agents_trio.testing``, are imported by ``providers.py``, not by the example)."""
    return "\n".join(IMPORT.sub(r"\1 livekit.agents", line) for line in source.split("\n"))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVEKIT_")}
    env["EXAMPLE_PROVIDERS"] = "fake"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _transcript(stdout: str) -> list[str]:
    pattern = re.compile(r"^(user|agent): |^  (tool|handoff): ")
    return [line for line in stdout.splitlines() if pattern.match(line)]


def test_every_example_has_its_lines_and_differs_only_in_imports() -> None:
    assert NAMES, "no example transcripts found"
    for name in NAMES:
        source = (EXAMPLES / f"{name}.py").read_text()
        assert (EXAMPLES / f"{name}.lines").exists()
        ported = to_livekit(source)
        changed = [(a, b) for a, b in zip(source.split("\n"), ported.split("\n")) if a != b]
        assert changed, f"{name} imports nothing from agents_trio"
        assert all(a.startswith(("from agents_trio", "import agents_trio")) for a, _ in changed)


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_agents_trio_console_text(name: str) -> None:
    lines = (EXAMPLES / f"{name}.lines").read_text()
    proc = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "console", "--text"],
                          input=lines, capture_output=True, text=True, timeout=120,
                          env=_env(), cwd=EXAMPLES)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = (EXAMPLES / f"{name}.transcript").read_text().splitlines()
    assert _transcript(proc.stdout) == expected, proc.stdout


@pytest.mark.parametrize("name", NAMES)
def test_runs_on_livekit_agents(name: str, tmp_path: Path) -> None:
    pytest.importorskip("sounddevice")  # LiveKit's console module imports it
    (tmp_path / f"{name}.py").write_text(to_livekit((EXAMPLES / f"{name}.py").read_text()))
    shutil.copy(EXAMPLES / "providers.py", tmp_path / "providers.py")
    lines = (EXAMPLES / f"{name}.lines").read_text()
    proc = subprocess.run([sys.executable, str(DRIVER), str(tmp_path / f"{name}.py")],
                          input=lines, capture_output=True, text=True, timeout=180,
                          env=_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = (EXAMPLES / f"{name}.transcript").read_text().splitlines()
    assert _transcript(proc.stdout) == expected, proc.stdout
