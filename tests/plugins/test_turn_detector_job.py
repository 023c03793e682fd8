"""LiveKit's job context in Trio jobs (issue 14): ``livekit.agents.get_job_context()`` works in
an entrypoint, so livekit-plugins-turn-detector's models construct there, and their
``do_inference`` reaches an inference executor across the bridge: LiveKit's own inference
process in console/connect jobs, the dispatched job's executor in the packed worker.

The model files cannot be downloaded here: the runner is ``FakeTurnDetectorRunner`` (a real
LiveKit ``_InferenceRunner`` under the plugin's inference method, scripted by the user's last
message) and ``languages.json`` is written into a private Hugging Face cache."""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="LiveKit's job context needs livekit-agents")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # the plugin says it is deprecated
    pytest.importorskip("livekit.plugins.turn_detector")

import livekit.agents as lk  # noqa: E402
from livekit.agents.inference_runner import _InferenceRunner  # noqa: E402

import agents_trio  # noqa: E402
from agents_trio.job import JobContext, run_job  # noqa: E402
from agents_trio.livekit_job import CrossLoopInferenceExecutor, InferenceProcess  # noqa: E402
from agents_trio.plugins import TurnDetectorAdapter, adapt  # noqa: E402
from agents_trio.testing import open_fake_room  # noqa: E402
from agents_trio.testing.livekit_fakes import (  # noqa: E402
    FakeTurnDetectorRunner,
    use_fake_turn_detector_runners,
    write_fake_turn_detector_files,
)
from test_turn_detector import _user_committed_at  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def fake_model_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """languages.json of both models (English threshold 0.5) in a private HF cache, and the
    fake runners registered in place of the plugin's."""
    import huggingface_hub.constants

    cache = write_fake_turn_detector_files(tmp_path / "hf", {"en": 0.5})
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(_InferenceRunner, "registered_runners",
                        dict(_InferenceRunner.registered_runners))
    use_fake_turn_detector_runners()
    return cache


class InProcessRunner:
    """An inference executor running a runner in this process (asyncio; no child process):
    what the job's executor does, on the autojump clock."""

    def __init__(self, runner: _InferenceRunner) -> None:
        self.runner = runner
        self.methods: list[str] = []
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def do_inference(self, method: str, data: bytes) -> bytes | None:
        self.methods.append(method)
        self.loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0.02)
        return self.runner.run(data)


def test_the_fake_runner_answers_as_the_real_one() -> None:
    runner = FakeTurnDetectorRunner()
    runner.initialize()
    ask = {"chat_ctx": [{"role": "assistant", "content": "Hi"},
                        {"role": "user", "content": "I was thinking..."}]}
    answer = json.loads(runner.run(json.dumps(ask).encode()) or b"")
    assert answer["eou_probability"] == FakeTurnDetectorRunner.UNLIKELY
    assert answer["input"] == "I was thinking..."
    ask["chat_ctx"][-1]["content"] = "That's all."
    assert json.loads(runner.run(json.dumps(ask).encode()) or b"")["eou_probability"] == \
        FakeTurnDetectorRunner.LIKELY


async def test_an_entrypoint_sees_both_job_contexts(autojump_clock: trio.testing.MockClock
                                                    ) -> None:
    seen: dict[str, Any] = {}
    executor = InProcessRunner(FakeTurnDetectorRunner())

    async def entrypoint(ctx: JobContext) -> None:
        seen["ours"] = agents_trio.get_job_context()
        seen["livekit"] = lk.get_job_context()

        async def child() -> None:
            seen["in a child task"] = lk.get_job_context()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)

    await run_job(entrypoint, url="ws://fake", token="t", job_id="AJ_1",
                  open_room_fn=open_fake_room, inference_executor=executor)
    lk_ctx = seen["livekit"]
    assert isinstance(seen["ours"], JobContext)
    assert isinstance(lk_ctx, lk.JobContext)
    assert seen["in a child task"] is lk_ctx
    assert lk_ctx.job.id == "AJ_1" and lk_ctx.room is seen["ours"].room
    assert lk_ctx.inference_executor is executor
    assert lk.get_job_context(required=False) is None  # unset once the job ended


@pytest.mark.parametrize("line, committed_at", [
    # likely finished: committed at the VAD's end of speech, min_delay having passed (+ the
    # executor's 0.02 s)
    ("I was thinking", 2.02),
    # trailing off: below the threshold, the turn waits for max_delay after the speech
    ("I was thinking...", 7.5),
])
async def test_a_multilingual_model_built_in_a_job_sets_the_end_of_turn_delay(
        autojump_clock: trio.testing.MockClock, fake_model_files: Path, line: str,
        committed_at: float, monkeypatch: pytest.MonkeyPatch) -> None:
    from livekit.plugins.turn_detector.multilingual import MultilingualModel

    import test_turn_detector

    executor = InProcessRunner(FakeTurnDetectorRunner())
    result: dict[str, Any] = {}
    real_actions = test_turn_detector.FakeActions

    class Actions(real_actions):  # type: ignore[misc, valid-type]
        def add_user_speech(self, start: float, end: float, text: str) -> Any:
            return super().add_user_speech(start, end, line)

    monkeypatch.setattr(test_turn_detector, "FakeActions", Actions)

    async def entrypoint(ctx: JobContext) -> None:
        model = MultilingualModel()  # LiveKit's constructor, reading LiveKit's job context
        adapted = adapt(model)
        assert isinstance(adapted, TurnDetectorAdapter)
        result["at"], result["errors"] = await _user_committed_at(adapted, language=True)

    await run_job(entrypoint, url="ws://fake", token="t", open_room_fn=open_fake_room,
                  inference_executor=executor)
    assert result["errors"] == []
    assert result["at"] == pytest.approx(committed_at, abs=0.02)
    assert executor.methods == ["lk_end_of_utterance_multilingual"]


async def test_a_console_job_runs_the_model_in_livekits_inference_process(
        fake_model_files: Path) -> None:
    """Real time, a real child process: no timing is asserted."""
    from livekit.plugins.turn_detector.english import EnglishModel
    from livekit.plugins.turn_detector.multilingual import MultilingualModel

    from agents_trio import ChatContext
    from agents_trio.console import run_console

    class NoConsole:
        def attach(self, session: Any) -> Any:
            raise AssertionError("no session here")

        serve = attach

    answers: dict[str, float] = {}

    async def entrypoint(ctx: JobContext) -> None:
        executor = lk.get_job_context().inference_executor
        assert isinstance(executor, InferenceProcess) and not executor.started
        for name, model in (("multi", MultilingualModel()), ("en", EnglishModel())):
            adapted = adapt(model)
            for text in ("Book a table for...", "Book a table for two."):
                chat = ChatContext()
                chat.add_message(role="user", content=text)
                answers[f"{name}: {text}"] = await adapted.predict_end_of_turn(chat,
                                                                               timeout=120)
        result["executor"] = executor

    result: dict[str, Any] = {}
    with trio.fail_after(180):
        await run_console(entrypoint, NoConsole())
    assert answers == {
        "multi: Book a table for...": FakeTurnDetectorRunner.UNLIKELY,
        "multi: Book a table for two.": FakeTurnDetectorRunner.LIKELY,
        "en: Book a table for...": FakeTurnDetectorRunner.UNLIKELY,
        "en: Book a table for two.": FakeTurnDetectorRunner.LIKELY,
    }
    executor = result["executor"]
    assert executor.started
    assert not executor._process.is_alive()  # the job closed it when it ended


def test_the_cross_loop_executor_runs_on_the_executors_loop() -> None:
    """The packed worker's case: the executor belongs to another thread's loop."""
    import threading

    # plain asyncio loops (trio-asyncio's policy may be installed by earlier tests)
    other = asyncio.SelectorEventLoop()

    def run(coro: Any) -> Any:
        loop = asyncio.SelectorEventLoop()
        try:
            return loop.run_until_complete(coro)
        finally:
            loop.close()

    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        inner = InProcessRunner(FakeTurnDetectorRunner())
        crossing = CrossLoopInferenceExecutor(inner, other)
        data = json.dumps({"chat_ctx": [{"role": "user", "content": "so..."}]}).encode()
        answer = run(crossing.do_inference("lk_end_of_utterance_en", data))
        assert json.loads(answer or b"")["eou_probability"] == FakeTurnDetectorRunner.UNLIKELY
        assert inner.loops == [other]

        # cancelling the caller cancels the call on the executor's loop
        class Hanging:
            cancelled = threading.Event()

            async def do_inference(self, method: str, data: bytes) -> bytes | None:
                try:
                    await asyncio.sleep(3600)
                finally:
                    self.cancelled.set()
                return None

        hanging = Hanging()

        async def give_up() -> None:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(CrossLoopInferenceExecutor(hanging, other)
                                       .do_inference("m", b""), 0.1)

        run(give_up())
        assert hanging.cancelled.wait(10)
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(10)
        other.close()


# -- the packed worker: LiveKit's AgentServer, its inference process, a Trio job ------------------
PACKED: dict[str, Any] = {}


async def predicting_entrypoint(ctx: JobContext) -> None:
    from livekit.plugins.turn_detector.multilingual import MultilingualModel

    from agents_trio import ChatContext

    try:
        executor = lk.get_job_context().inference_executor
        adapted = TurnDetectorAdapter(MultilingualModel(), bridge=ctx.bridge)
        answers = []
        for text in ("Well...", "Yes, that's it."):
            chat = ChatContext()
            chat.add_message(role="user", content=text)
            answers.append(await adapted.predict_end_of_turn(chat, timeout=120))
        PACKED["result"] = (executor, answers, ctx.job_id)
    finally:
        PACKED["loop"].call_soon_threadsafe(PACKED["done"].set)


def test_a_packed_job_uses_the_dispatched_jobs_inference_executor(fake_model_files: Path
                                                                  ) -> None:
    """Real time, LiveKit's worker with its inference process (a child process); the Trio
    job's model reaches it through the job's own executor, on the job thread's loop."""
    from agents_trio.job_host import JobHost
    from agents_trio.worker import create_agent_server

    host = JobHost(name="inference jobs")

    async def main() -> None:
        PACKED["loop"] = asyncio.get_running_loop()
        PACKED["done"] = asyncio.Event()
        server = create_agent_server(
            predicting_entrypoint, job_host=host, open_room_fn=open_fake_room,
            num_idle_processes=1, port=0, shutdown_grace=2.0, ws_url="ws://fake",
            api_key="key", api_secret="secret-of-32-bytes-for-the-jwt-hmac")
        up = asyncio.Event()
        server.on("worker_started", lambda: up.set())
        run = asyncio.ensure_future(server.run(unregistered=True))
        try:
            await up.wait()
            await server.simulate_job("room-eou", fake_job=True)
            await PACKED["done"].wait()
        finally:
            await server.aclose()
            await run

    loop = asyncio.SelectorEventLoop()
    try:
        loop.run_until_complete(asyncio.wait_for(main(), 150))
    finally:
        loop.close()
        host.close(10)
    executor, answers, job_id = PACKED["result"]
    assert isinstance(executor, CrossLoopInferenceExecutor)
    assert answers == [FakeTurnDetectorRunner.UNLIKELY, FakeTurnDetectorRunner.LIKELY]
    assert job_id


def test_console_text_runs_an_agent_built_with_the_plugin_model(tmp_path: Path) -> None:
    """``python agent.py console --text`` with ``turn_detection=MultilingualModel()``, as
    LiveKit's basic example after an import-only port."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    cache = write_fake_turn_detector_files(tmp_path / "hf")
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_CACHE": str(cache)}
    done = subprocess.run([sys.executable, str(root / "tests" / "data" /
                                                "turn_detector_agent.py"), "console", "--text"],
                          input="Hello\nthanks\n", capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "  [executor: InferenceProcess]",
        "agent: Hi, I'm Kelly.",
        "user: Hello",
        "agent: Hello to you.",
        "user: thanks",
        "agent: Sure.",
    ]
