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
