"""The benchmark's Pipecat side runs the scripted conversation: one session on Pipecat's own
pipeline, on an asyncio loop whose clock is virtual (``bench.virtual_asyncio``), so nothing
waits on the wall clock. Skipped where pipecat-ai is not installed (it is in ``.[bench]``).

Each session runs in a process of its own (``python -m bench.pipecat_side``): importing
Pipecat replaces ``asyncio.wait_for`` for the whole process, which the rest of the suite must
not inherit.

Speed is never asserted here; these check that the conversation happens as scripted: every
utterance transcribed and in the context, every reply asked for once and heard, and the story
interrupted by the utterance scripted to interrupt it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import core

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pipecat") is None,
                                reason="pipecat-ai is not installed (pip install -e '.[bench]')")


@functools.cache
def run_one(kind: str, transforms: bool, index: int = 1) -> dict[str, Any]:
    """One session of the ``kind`` script: the probe's record (JSON: keys are strings), its
    latencies and its LLM context's messages."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "bench.pipecat_side", "--script", kind,
         "--transforms", "on" if transforms else "off", "--index", str(index)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def keys(d: dict[str, Any]) -> list[int]:
    return sorted(int(k) for k in d)


def texts(messages: list[dict[str, Any]], role: str) -> list[str]:
    return [m["content"] for m in messages
            if m.get("role") == role and isinstance(m.get("content"), str)]


@pytest.mark.parametrize(("kind", "transforms"), [("full", False), ("quick", True)])
def test_scripted_conversation_completes(kind: str, transforms: bool) -> None:
    out = run_one(kind, transforms)
    probe, samples, messages = out["probe"], out["samples"], out["messages"]
    script = core.build_script(1, kind=kind)
    assert probe["error"] is None
    assert samples["missing"] == []
    # every utterance transcribed, and the user turns in the context in script order
    assert keys(probe["stt_final"]) == [u.index for u in script.utterances]
    assert texts(messages, "user") == [u.text for u in script.utterances]
    # every scripted reply asked for once, nothing else asked; every spoken one heard
    assert keys(probe["llm_request"]) == [r.index for r in script.replies]
    assert probe["llm_other"] == []
    assert [t["reply"] for t in samples["turns"]] == [r.index for r in script.replies if r.text]
    assert keys(probe["sink_first_frame"]) == [r.index for r in script.replies if r.text]
    # the replies nobody interrupted are in the context whole (Pipecat may re-space them)
    spoken = [" ".join(t.split()) for t in texts(messages, "assistant")]
    interrupted = {u.interrupts for u in script.utterances if u.interrupts is not None}
    for r in script.replies:
        if r.text and r.index not in interrupted:
            assert r.text in spoken


def test_the_story_is_interrupted_where_scripted() -> None:
    out = run_one("full", False)
    probe, samples, messages = out["probe"], out["samples"], out["messages"]
    script = core.build_script(1, kind="full")
    (stop,) = [u for u in script.utterances if u.interrupts is not None]
    story = str(stop.interrupts)
    # the VAD's start of speech comes on the frame that completes 3 speech frames
    nominal = probe["t0"] + stop.start + core.VAD_START_FRAMES * core.FRAME
    threshold = probe["vad_threshold"][str(stop.index)]
    assert abs(threshold - nominal) < core.FRAME / 2
    # the output drops the story's audio at that point, and its LLM and TTS streams stop
    cleared = [(t, r) for t, r in probe["clears"] if t >= threshold]
    assert cleared and str(cleared[0][1]) == story
    assert story in probe["llm_cancelled"] and story in probe["tts_cancelled"]
    assert len(samples["interrupts"]) == 1
    # only what was said before the interruption is in the context, not the whole story
    story_text = " ".join(script.replies[int(story)].text.split())
    heard = [t for t in (" ".join(m.split()) for m in texts(messages, "assistant"))
             if story_text.startswith(t[:20])]
    assert heard and all(len(t) < len(story_text) for t in heard)
    # the reply that follows is answered, and no handoff is claimed (Pipecat has none)
    assert str(stop.reply) in probe["sink_first_frame"]
    assert probe["on_enter_new"] is None and not probe["handoff_supported"]
