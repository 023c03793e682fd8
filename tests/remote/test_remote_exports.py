"""The remote package and the wire module export what they define (as tests/test_exports.py
does for the top level)."""

from __future__ import annotations

import types

import agents_trio
import agents_trio.remote.wire
import agents_trio.remote


def _public(module: types.ModuleType) -> set[str]:
    return {n for n, v in vars(module).items()
            if not n.startswith("_") and not isinstance(v, types.ModuleType)
            and getattr(v, "__module__", "").startswith(module.__name__)}


def test_remote_and_wire_names_are_exported() -> None:
    for module in (agents_trio.remote, agents_trio.remote.wire):
        assert [n for n in module.__all__ if not hasattr(module, n)] == []
        assert _public(module) - set(module.__all__) == set()


def test_the_main_remote_names_are_top_level() -> None:
    for name in ("SessionHost", "serve_session", "open_session_host", "RemoteSession",
                 "open_remote_session", "connect_remote_session", "RemoteSessionError",
                 "RemoteSessionClosedError", "RemoteConnectionError", "WireError"):
        assert name in agents_trio.__all__
    assert issubclass(agents_trio.RemoteSessionError, agents_trio.AgentsTrioError)
    assert issubclass(agents_trio.WireError, agents_trio.AgentsTrioError)
    assert issubclass(agents_trio.RemoteSessionClosedError, agents_trio.SessionClosedError)
