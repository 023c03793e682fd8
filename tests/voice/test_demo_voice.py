"""``python -m agents_trio demo --voice --out DIR`` on real models (issue 11 items 7 and 8):
the WAVs hold speech where the timeline says so, and silence after the clear."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents_trio.__main__ import main as cli_main
from agents_trio.demo import STORY
from agents_trio.demo_voice import LINES, missing_dependencies
from agents_trio.io.wav import read_wav, rms

# real models: the [voice] extra and espeak-ng (CI installs both, see .ci/run)
MISSING = missing_dependencies()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs {'; '.join(MISSING)}")

RATE = 16000
SPEECH = 300.0      # RMS of speech in these WAVs is in the thousands; silence is 0


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    missing = missing_dependencies()
    assert not missing, f"the voice tests need: {missing}"    # CI installs them
    out_dir = tmp_path_factory.mktemp("voice") / "new" / "dir"    # created by the demo
    out = io.StringIO()
    began = time.monotonic()
    import contextlib
    with contextlib.redirect_stdout(out):
        code = cli_main(["demo", "--voice", "--out", str(out_dir)])
    took = time.monotonic() - began
    text = out.getvalue()
    assert code == 0, text
    return {"dir": out_dir, "stdout": text, "took": took,
            "timeline": json.loads((out_dir / "timeline.json").read_text())}


def region(samples: np.ndarray, start: float, end: float) -> np.ndarray:
    return samples[int(start * RATE):int(end * RATE)]


def norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z ]", " ", text.lower()).split())


def test_voice_demo_writes_the_files_and_runs_under_a_minute(demo_run: dict[str, Any]) -> None:
    assert demo_run["took"] < 60.0
    d: Path = demo_run["dir"]
    user, rate_u, ch_u = read_wav(d / "user.wav")
    agent, rate_a, ch_a = read_wav(d / "agent.wav")
    conv, rate_c, ch_c = read_wav(d / "conversation.wav")
    assert (rate_u, ch_u, rate_a, ch_a, rate_c, ch_c) == (RATE, 1, RATE, 1, RATE, 2)
    assert len(user) == len(agent) == len(conv) // 2
    stereo = conv.reshape(-1, 2)
    assert np.array_equal(stereo[:, 0], user) and np.array_equal(stereo[:, 1], agent)


def test_voice_demo_timeline_schema(demo_run: dict[str, Any]) -> None:
    tl = demo_run["timeline"]
    assert set(tl) == {"user_turns", "agent_replies", "tool_calls", "metrics"}
    assert all(set(t) == {"start", "end", "transcript"} for t in tl["user_turns"])
    assert all(set(r) == {"start", "end", "text", "interrupted", "cleared_at"}
               for r in tl["agent_replies"])
    assert all(set(c) == {"t", "name", "arguments"} for c in tl["tool_calls"])
    assert set(tl["metrics"]) == {"end_of_speech_to_first_audio_s", "barge_in_to_clear_s"}


def test_voice_demo_conversation(demo_run: dict[str, Any]) -> None:
    tl = demo_run["timeline"]
    turns, replies = tl["user_turns"], tl["agent_replies"]
    # four user turns, each recognized from the real audio
    assert [norm(t["transcript"]) for t in turns] == [norm(line) for line in LINES]
    # a tool call with the city the user said, between the question and the answer
    (call,) = tl["tool_calls"]
    assert call["name"] == "get_weather" and call["arguments"] == {"location": "Lisbon"}
    assert turns[0]["end"] < call["t"] < turns[1]["start"]
    assert any("sunny and 22 degrees in Lisbon" in r["text"] for r in replies)
    # one barge-in: the story was cut while the user said "Wait, stop."
    (story,) = [r for r in replies if r["interrupted"]]
    assert story["cleared_at"] is not None and story["end"] == pytest.approx(story["cleared_at"])
    assert turns[2]["start"] < story["cleared_at"] < turns[2]["end"] + 0.5
    assert STORY.startswith(story["text"]) and 0 < len(story["text"]) < len(STORY)
    assert all(r["cleared_at"] is None for r in replies if not r["interrupted"])
    # times in order: every reply starts after the user turn it answers ended
    for reply in replies[1:]:
        assert any(t["end"] <= reply["start"] for t in turns)
    m = tl["metrics"]
    assert len(m["end_of_speech_to_first_audio_s"]) == 4
    assert all(0.0 < x < 3.0 for x in m["end_of_speech_to_first_audio_s"])
    assert len(m["barge_in_to_clear_s"]) == 1 and 0.0 < m["barge_in_to_clear_s"][0] < 1.5


def test_voice_demo_wavs_hold_speech_where_the_timeline_says(demo_run: dict[str, Any]) -> None:
    d: Path = demo_run["dir"]
    tl = demo_run["timeline"]
    user, _, _ = read_wav(d / "user.wav")
    agent, _, _ = read_wav(d / "agent.wav")
    busy = [(t["start"], t["end"]) for t in tl["user_turns"]]
    for start, end in busy:
        assert rms(region(user, start, end)) > SPEECH
    # the user is silent outside the turns (but for the fading tail of a clip, which is
    # below the speech threshold)
    edges = [0.0] + [x for span in busy for x in span] + [len(user) / RATE]
    for gap_start, gap_end in zip(edges[::2], edges[1::2]):
        assert rms(region(user, gap_start + 0.05, gap_end - 0.05)) < 30.0
    replies = tl["agent_replies"]
    for reply in replies:
        assert rms(region(agent, reply["start"], reply["end"])) > SPEECH
    # silence before the first reply, between replies, and after the last one
    edges = [0.0] + [x for r in replies for x in (r["start"], r["end"])] + [len(agent) / RATE]
    for gap_start, gap_end in zip(edges[::2], edges[1::2]):
        assert rms(region(agent, gap_start + 0.02, gap_end - 0.02)) == 0.0


def test_voice_demo_agent_is_silent_after_the_clear(demo_run: dict[str, Any]) -> None:
    d: Path = demo_run["dir"]
    tl = demo_run["timeline"]
    agent, _, _ = read_wav(d / "agent.wav")
    (story,) = [r for r in tl["agent_replies"] if r["interrupted"]]
    nxt = min(r["start"] for r in tl["agent_replies"] if r["start"] > story["cleared_at"])
    # speech right up to the clear (the story was mid-sentence) ...
    assert rms(region(agent, story["cleared_at"] - 0.5, story["cleared_at"])) > SPEECH
    # ... and nothing of the rest of the story after it
    assert nxt - story["cleared_at"] > 0.3
    assert rms(region(agent, story["cleared_at"] + 0.01, nxt - 0.01)) == 0.0


def test_voice_demo_prints_the_timeline_in_time_order(demo_run: dict[str, Any]) -> None:
    lines = demo_run["stdout"].splitlines()
    times = [float(m.group(1)) for line in lines
             if (m := re.match(r"\s*(-?\d+\.\d+)s  ", line))]
    assert len(times) > 30 and times == sorted(times)
    text = demo_run["stdout"]
    assert "playback interrupted" in text and "get_weather" in text
    assert "timeline.json" in text and "finished in" in text
