"""The public names: everything in ``__all__`` exists, and nothing public is missing from it."""

from __future__ import annotations

import types

import agents_trio
import agents_trio.nurseries
import agents_trio.testing

API_MD_NAMES = {"Agent", "AgentSession", "RunContext", "function_tool", "SpeechHandle",
                "RunResult", "ToolError", "StopResponse", "ChatContext", "ChatMessage",
                "FunctionCall", "FunctionCallOutput", "AgentHandoff", "FunctionToolCall",
                "FlushSentinel"}
TESTING_NAMES = {"FakeActions", "create_session", "run_session", "FakeLLM", "FakeSTT",
                 "FakeTTS", "FakeVAD", "FakeAudioInput", "FakeAudioOutput"}


def _public(module: types.ModuleType) -> set[str]:
    return {n for n, v in vars(module).items()
            if not n.startswith("_") and not isinstance(v, types.ModuleType)
            and getattr(v, "__module__", module.__name__).startswith("agents_trio")}


def test_all_names_exist() -> None:
    for module in (agents_trio, agents_trio.testing, agents_trio.nurseries):
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert missing == [], f"{module.__name__}.__all__ names missing: {missing}"
        assert len(set(module.__all__)) == len(module.__all__)


def test_every_public_name_is_exported() -> None:
    for module in (agents_trio, agents_trio.testing, agents_trio.nurseries):
        not_exported = _public(module) - set(module.__all__)
        assert not_exported == set(), f"{module.__name__}: not in __all__: {not_exported}"


def test_api_md_names_are_exported() -> None:
    assert API_MD_NAMES <= set(agents_trio.__all__)
    assert TESTING_NAMES <= set(agents_trio.testing.__all__)


def test_the_expect_dsl_is_in_testing_and_still_importable_from_run_result() -> None:
    import sys
    import subprocess

    import agents_trio.run_result
    import agents_trio.testing.expect

    for name in ("RunAssert", "EventAssert", "EventRangeAssert", "ChatMessageAssert",
                 "FunctionCallAssert", "FunctionCallOutputAssert", "AgentHandoffAssert",
                 "format_events"):
        assert getattr(agents_trio.run_result, name) is getattr(agents_trio.testing, name)
        assert getattr(agents_trio.testing.expect, name) is getattr(agents_trio.testing, name)
    # The core does not load the test DSL when it is imported.
    code = "import sys, agents_trio; print('agents_trio.testing' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
