"""LiveKit's example agents, ported by changing their imports (see each file's header), run
as a user runs them: ``python AGENT console --text`` with ``AGENT.lines`` piped in.

Each must print ``AGENT.transcript``, which is what the same file prints on LiveKit Agents
with its imports changed back (LiveKit's own console worker, driven by
``tests/two_runtimes/livekit_text_console.py``), and every LLM request (chat items, tools
offered, tool choice) must be the one LiveKit makes: both runs write them
(``fakes.request_log``) and they are compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("livekit.agents")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DRIVER = ROOT / "tests" / "two_runtimes" / "livekit_text_console.py"
IMPORT = re.compile(r"^(from|import) agents_trio(?=[\s.])")
TRANSCRIPT = re.compile(r"^(user|agent): |^  (tool|handoff): ")


def _env(requests: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVEKIT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["PORTED_REQUESTS_FILE"] = str(requests)
    return env


def _transcript(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if TRANSCRIPT.match(line)]


def run_on_agents_trio(name: str, tmp_path: Path) -> tuple[list[str], list[object]]:
    requests = tmp_path / "agents_trio_requests.json"
    proc = subprocess.run([sys.executable, str(HERE / f"{name}.py"), "console", "--text"],
                          input=(HERE / f"{name}.lines").read_text(), capture_output=True,
                          text=True, timeout=120, env=_env(requests), cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _transcript(proc.stdout), json.loads(requests.read_text())


def run_on_livekit(name: str, tmp_path: Path) -> tuple[list[str], list[object]]:
    pytest.importorskip("sounddevice")  # LiveKit's console module imports it
    source = (HERE / f"{name}.py").read_text()
    ported = "\n".join(IMPORT.sub(r"\1 livekit.agents", line) for line in source.split("\n"))
    (tmp_path / f"{name}.py").write_text(ported)
    (tmp_path / "fakes.py").write_text((HERE / "fakes.py").read_text())
    target = tmp_path / f"{name}.py"
    if "\nserver = AgentServer()" not in source:   # a WorkerOptions agent: LiveKit's server of it
        target = tmp_path / "wrapper.py"
        target.write_text(
            f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport {name} as m\n"
            "from livekit.agents import AgentServer, WorkerOptions\n"
            "server = AgentServer.from_server_options(WorkerOptions(\n"
            "    entrypoint_fnc=m.entrypoint, prewarm_fnc=getattr(m, 'prewarm', None)))\n")
    requests = tmp_path / "livekit_requests.json"
    proc = subprocess.run([sys.executable, str(DRIVER), str(target)],
                          input=(HERE / f"{name}.lines").read_text(), capture_output=True,
                          text=True, timeout=180, env=_env(requests), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _transcript(proc.stdout), json.loads(requests.read_text())


def check_both(name: str, tmp_path: Path) -> None:
    expected = (HERE / f"{name}.transcript").read_text().splitlines()
    ours, our_requests = run_on_agents_trio(name, tmp_path)
    assert ours == expected
    theirs, their_requests = run_on_livekit(name, tmp_path)
    assert theirs == expected, "LiveKit's own run changed: update the .transcript"
    assert our_requests == their_requests


def test_restaurant_agent_hands_off_through_four_agents_as_on_livekit(tmp_path: Path) -> None:
    check_both("restaurant_agent", tmp_path)


def test_multi_agent_hands_off_to_a_realtime_story_agent_as_on_livekit(tmp_path: Path) -> None:
    check_both("multi_agent", tmp_path)


def test_structured_output_keeps_the_transcription_nodes_text_as_on_livekit(
        tmp_path: Path) -> None:
    check_both("structured_output", tmp_path)

