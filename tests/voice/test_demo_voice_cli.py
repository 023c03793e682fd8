"""The voice demo's command line, without running it: what it says when something is missing,
and ``--out`` without ``--voice``."""

from __future__ import annotations

import shutil
import sys

import pytest

from agents_trio import demo_voice
from agents_trio.__main__ import main as cli_main


def test_voice_demo_says_what_is_missing(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert demo_voice.main(out_dir="unused", out=sys.stdout) == 1
    assert "apt-get install espeak-ng" in capsys.readouterr().out


def test_out_needs_voice(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["demo", "--out", "x"])
    assert "--out needs --voice" in capsys.readouterr().err


def test_voice_demo_without_a_speaker_says_so_and_runs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from agents_trio.io.wav import WavInput, WavOutput

    ran: list[object] = []

    async def run(self: demo_voice.VoiceDemo, player: object = None) -> None:
        ran.append(player)
        self.user, self.agent, self.duration = WavInput(), WavOutput(), 0.0

    monkeypatch.setattr(demo_voice, "missing_dependencies", lambda: [])
    monkeypatch.setattr(demo_voice.VoiceDemo, "run", run)
    monkeypatch.setitem(sys.modules, "sounddevice", None)
    assert demo_voice.main(out_dir=None, out=sys.stdout) == 0
    text = capsys.readouterr().out
    assert "No speaker: sounddevice is not installed" in text
    assert "libportaudio2" in text and "--out DIR" in text
    assert ran == [None]
