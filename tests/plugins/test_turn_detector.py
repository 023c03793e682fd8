"""Turn detectors with LiveKit's end-of-turn protocol (asyncio) through the adapter
(issue 11, item 3), and livekit-plugins-turn-detector's models through adapt()."""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from livekit.agents import LanguageCode  # noqa: E402
from livekit.agents import llm as lk_llm  # noqa: E402

from agents_trio import Agent, APIError, ChatContext, TurnDetector, open_bridge  # noqa: E402
from agents_trio.options import check_turn_detection  # noqa: E402
from agents_trio.plugins import TurnDetectorAdapter, adapt  # noqa: E402
from agents_trio.models import SpeechData, SpeechEvent  # noqa: E402
from agents_trio.testing import FakeActions, create_session, run_session  # noqa: E402
from agents_trio.testing.fake_models import FakeSTT  # noqa: E402


class ScriptedLKDetector:
    """A turn detector as LiveKit users write one: asyncio methods, LiveKit's ChatContext.

    ``predict_end_of_turn`` takes ``latency`` seconds (``asyncio.sleep``, on Trio's clock
    through the bridge) and answers the next of ``probabilities``.
    """

    def __init__(self, probabilities: list[float], *, threshold: float | None = 0.5,
                 latency: float = 0.05, fail: bool = False) -> None:
        self.probabilities = list(probabilities)
        self.threshold = threshold
        self.latency = latency
        self.fail = fail
        self.contexts: list[lk_llm.ChatContext] = []
        self.languages: list[Any] = []
        self.timeouts: list[float | None] = []
        self.in_asyncio: list[bool] = []

    @property
    def model(self) -> str:
        return "scripted-eou"

    @property
    def provider(self) -> str:
        return "tests"

    async def unlikely_threshold(self, language: LanguageCode | None) -> float | None:
        self.languages.append(language)
        return self.threshold

    async def supports_language(self, language: LanguageCode | None) -> bool:
        return await self.unlikely_threshold(language) is not None

    async def predict_end_of_turn(self, chat_ctx: lk_llm.ChatContext, *,
                                  timeout: float | None = 3.0) -> float:
        self.in_asyncio.append(asyncio.current_task() is not None)
        self.contexts.append(chat_ctx)
        self.timeouts.append(timeout)
        await asyncio.sleep(self.latency)
        if self.fail:
            raise RuntimeError("eou model crashed")
        return self.probabilities.pop(0)


class EnglishFakeSTT(FakeSTT):
    """The harness's scripted STT, reporting the language of its transcripts (``en``)."""

    def timeline(self) -> list[tuple[float, SpeechEvent]]:
        return [(t, SpeechEvent(type=ev.type, alternatives=[
            SpeechData(text=a.text, language="en") for a in ev.alternatives]))
            for t, ev in super().timeline()]


async def _user_committed_at(detector: object, *, drain: float = 8.0,
                             language: bool = False) -> tuple[float, Any]:
    """One user turn, speech 0.5-1.5 s; when the user's message is committed."""
    actions = FakeActions()
    actions.add_user_speech(0.5, 1.5, "I was thinking")
    actions.add_llm("Go on.")
    actions.add_tts(0.5)
    session = create_session(actions, turn_handling={"turn_detection": detector})
    if language:
        session.stt = EnglishFakeSTT(actions.user_speeches)
    committed: list[float] = []
    errors: list[Any] = []
    session.on("conversation_item_added", lambda ev: committed.append(ev.created_at)
               if getattr(ev.item, "role", "") == "user" else None)
    session.on("error", errors.append)
    async with open_bridge() as bridge:
        with trio.fail_after(60):
            t0 = await run_session(session, Agent(instructions="x"), drain_delay=drain)
        assert bridge.statistics().asyncio_tasks == 0
    (at,) = committed
    return at - t0, errors


@pytest.mark.parametrize("probability, committed_at", [
    # VAD end of speech at 2.0 (speech end 1.5 + 0.5 silence); min_delay 0.5 from the end of
    # speech has passed then, so a likely end of turn commits at once (+ the detector's 0.05).
    (0.9, 2.05),
    # Below the threshold: max_delay (the harness's 6.0) from the end of speech.
    (0.2, 7.5),
])
async def test_end_of_turn_delay_follows_the_detectors_probability(
        autojump_clock: trio.testing.MockClock, probability: float, committed_at: float) -> None:
    detector = ScriptedLKDetector([probability])
    adapter = TurnDetectorAdapter(detector)
    assert isinstance(adapter, TurnDetector)
    check_turn_detection(adapter)  # the core accepts it
    at, errors = await _user_committed_at(adapter)
    assert at == pytest.approx(committed_at, abs=0.02)
    assert not errors
    # The detector ran as asyncio code and saw LiveKit's chat context with the user's words.
    assert detector.in_asyncio == [True]
    (ctx,) = detector.contexts
    assert isinstance(ctx, lk_llm.ChatContext)
    assert ctx.items[-1].role == "user" and ctx.items[-1].text_content == "I was thinking"
    assert detector.timeouts == [3.0]  # its own default: the session gives no timeout


async def test_a_failing_lk_detector_is_reported_and_the_turn_ends_at_min_delay(
        autojump_clock: trio.testing.MockClock) -> None:
    detector = ScriptedLKDetector([0.0], fail=True)
    adapter = TurnDetectorAdapter(detector)
    at, errors = await _user_committed_at(adapter, drain=3.0)
    assert at == pytest.approx(2.05, abs=0.02)
    (error,) = errors
    assert isinstance(error.error, APIError) and "eou model crashed" in str(error.error)
    assert error.source is adapter


async def test_no_threshold_for_the_language_means_no_delay(
        autojump_clock: trio.testing.MockClock) -> None:
    detector = ScriptedLKDetector([0.0], threshold=None)
    at, _ = await _user_committed_at(TurnDetectorAdapter(detector), drain=3.0)
    assert at == pytest.approx(2.0, abs=0.02)
    assert detector.contexts == []  # not asked: the language is not supported


async def test_adapter_converts_language_context_and_timeout(
        autojump_clock: trio.testing.MockClock) -> None:
    detector = ScriptedLKDetector([0.7])
    adapter = TurnDetectorAdapter(detector, timeout=1.5)
    ctx = ChatContext()
    ctx.add_message(role="assistant", content="How can I help?")
    ctx.add_message(role="user", content="Book a table for")
    async with open_bridge():
        assert await adapter.supports_language("en_us") is True
        assert await adapter.unlikely_threshold(None) == 0.5
        assert await adapter.predict_end_of_turn(ctx) == 0.7
    assert detector.languages[0] == "en-US" and isinstance(detector.languages[0], LanguageCode)
    assert detector.languages[1] is None
    assert detector.timeouts == [1.5]
    assert [(m.role, m.text_content) for m in detector.contexts[0].messages()] == [
        ("assistant", "How can I help?"), ("user", "Book a table for")]
    assert (adapter.model, adapter.provider) == ("scripted-eou", "tests")


def test_adapter_rejects_what_is_not_a_detector() -> None:
    with pytest.raises(TypeError, match="predict_end_of_turn"):
        TurnDetectorAdapter(object())  # type: ignore[arg-type]


# -- livekit-plugins-turn-detector ----------------------------------------------------------
class FakeInferenceExecutor:
    """Stands in for the LiveKit job's inference executor (the process running the ONNX
    model): answers the EOU inference request with a fixed probability."""

    def __init__(self, probability: float) -> None:
        self.probability = probability
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def do_inference(self, method: str, data: bytes) -> bytes:
        self.requests.append((method, json.loads(data)))
        await asyncio.sleep(0.02)
        return json.dumps({"eou_probability": self.probability}).encode()


def _plugin_model(cls: type, probability: float) -> tuple[Any, FakeInferenceExecutor]:
    """A real plugin model object without its job context and downloaded weights (neither
    exists here): the base class's own constructor with a stand-in inference executor."""
    from livekit.plugins.turn_detector.base import EOUModelBase
    executor = FakeInferenceExecutor(probability)
    model = cls.__new__(cls)
    EOUModelBase.__init__(model, model_type=("multilingual" if "Multi" in cls.__name__
                                             else "en"),
                          inference_executor=executor, load_languages=False)
    model._languages = {"en": {"threshold": 0.4}}  # normally languages.json from the weights
    return model, executor


@pytest.fixture
def turn_detector_plugin() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the plugin says it is deprecated
        return pytest.importorskip("livekit.plugins.turn_detector",
                                   reason="needs livekit-plugins-turn-detector")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", ["multilingual.MultilingualModel", "english.EnglishModel"])
def test_plugin_models_cannot_be_built_outside_a_livekit_job(turn_detector_plugin: Any,
                                                             name: str) -> None:
    """Offline and outside a LiveKit job, LiveKit's own constructor fails with a clear error
    (it needs the job's inference executor, then the downloaded weights)."""
    import importlib
    module, cls_name = name.split(".")
    cls = getattr(importlib.import_module(f"livekit.plugins.turn_detector.{module}"), cls_name)
    with pytest.raises(RuntimeError, match="no job context found"):
        cls()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", ["multilingual.MultilingualModel", "english.EnglishModel"])
async def test_adapt_recognizes_the_plugin_models_and_runs_them(
        autojump_clock: trio.testing.MockClock, turn_detector_plugin: Any, name: str) -> None:
    import importlib
    module, cls_name = name.split(".")
    cls = getattr(importlib.import_module(f"livekit.plugins.turn_detector.{module}"), cls_name)
    model, executor = _plugin_model(cls, probability=0.1)
    adapted = adapt(model)
    assert isinstance(adapted, TurnDetectorAdapter) and adapted.detector is model
    check_turn_detection(adapted)
    assert adapted.provider == "livekit"
    ctx = ChatContext()
    ctx.add_message(role="user", content="I want to")
    async with open_bridge():
        assert await adapted.supports_language("en") is True
        assert await adapted.supports_language("fr") is False
        assert await adapted.unlikely_threshold("en-GB") == 0.4
        assert await adapted.predict_end_of_turn(ctx) == pytest.approx(0.1)
    ((method, payload),) = executor.requests
    assert method.startswith("lk_end_of_utterance")
    assert payload == {"chat_ctx": [{"role": "user", "content": "I want to"}]}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("probability, committed_at", [(0.9, 2.02), (0.1, 7.5)])
async def test_a_plugin_model_in_a_session_sets_the_end_of_turn_delay(
        autojump_clock: trio.testing.MockClock, turn_detector_plugin: Any, probability: float,
        committed_at: float) -> None:
    from livekit.plugins.turn_detector.multilingual import MultilingualModel
    model, executor = _plugin_model(MultilingualModel, probability=probability)
    at, errors = await _user_committed_at(adapt(model), language=True)
    assert not errors
    assert at == pytest.approx(committed_at, abs=0.02)
    ((_, payload),) = executor.requests
    assert payload == {"chat_ctx": [{"role": "user", "content": "I was thinking"}]}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_without_a_language_the_plugin_model_is_not_asked(
        autojump_clock: trio.testing.MockClock, turn_detector_plugin: Any) -> None:
    from livekit.plugins.turn_detector.multilingual import MultilingualModel
    model, executor = _plugin_model(MultilingualModel, probability=0.1)
    # No language from the STT: the multilingual model has no threshold (as in LiveKit) and
    # the turn ends at min_delay without asking it.
    at, _ = await _user_committed_at(adapt(model), drain=3.0)
    assert at == pytest.approx(2.0, abs=0.02)
    assert executor.requests == []
