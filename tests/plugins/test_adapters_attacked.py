"""The LLM, TTS and whole-recording STT adapters attacked the way failing providers and a
hostile session would: providers failing at every point (before the first chunk, after some,
at the end; with LiveKit's errors and others), hanging, refusing to close; consumers
cancelled at every point or leaving early; odd payloads. Fakes are built on LiveKit's own base
classes (``LLMStream``, ``SynthesizeStream``, ``STT``) so the adapters see the real stream
machinery, and every run checks the invariants:

- every provider stream opened is closed exactly once, and nothing of it is left running on
  the asyncio loop;
- a provider error reaches the Trio caller exactly once, as an ``agents_trio.APIError``
  naming the provider (never a bare ``asyncio.CancelledError`` or a ``BridgeError``);
- no chunk is delivered twice, out of order, or after the stream ended;
- leaving is bounded.

Everything runs on Trio's virtual clock."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from livekit import rtc
from livekit.agents import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, APIConnectOptions
from livekit.agents import APIError as LKAPIError
from livekit.agents import llm as lk_llm
from livekit.agents import stt as lk_stt
from livekit.agents import tts as lk_tts
from livekit.agents import utils as lk_utils

from agents_trio import APIError, BridgeError, ChatContext, ChatMessage, open_bridge
from agents_trio.plugins import LLMAdapter, TTSAdapter
from agents_trio.plugins._common import CLOSE_GRACE
from agents_trio.plugins.stt import RecognizingSTTAdapter
from agents_trio.plugins._convert import from_lk_chunk

NO_RETRY = APIConnectOptions(max_retry=0)
RATE = 24000


def _ctx() -> ChatContext:
    return ChatContext([ChatMessage(role="user", content=["hi"])])


# -- a scripted LLM ---------------------------------------------------------------------------
class ScriptedLLM(lk_llm.LLM[Any]):
    """Each stream plays ``script``: ("chunk", text) sends a chunk, ("sleep", s) waits,
    ("fail", error) raises, ("hang", None) waits forever, ("stubborn", s) waits forever and
    takes ``s`` seconds to give in to a cancellation."""

    def __init__(self, script: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.script = script
        self.opened = 0
        self.closed = 0
        self.running = 0

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def provider(self) -> str:
        return "scripted"

    def chat(self, *, chat_ctx: lk_llm.ChatContext, tools: list[Any] | None = None,
             conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
             parallel_tool_calls: Any = NOT_GIVEN, tool_choice: Any = NOT_GIVEN,
             extra_kwargs: Any = NOT_GIVEN) -> lk_llm.LLMStream:
        self.opened += 1
        return ScriptedLLMStream(self, chat_ctx=chat_ctx, tools=tools or [],
                                 conn_options=conn_options)


class ScriptedLLMStream(lk_llm.LLMStream):
    close_hangs_for = 0.0  # seconds its aclose waits (for the socket's close) once cancelled

    async def _run(self) -> None:
        fake = self._llm
        assert isinstance(fake, ScriptedLLM)
        fake.running += 1
        try:
            for kind, arg in fake.script:
                if kind == "chunk":
                    self._event_ch.send_nowait(lk_llm.ChatChunk(
                        id="c", delta=lk_llm.ChoiceDelta(role="assistant", content=arg)))
                elif kind == "sleep":
                    await asyncio.sleep(arg)
                elif kind == "fail":
                    raise arg
                elif kind == "hang":
                    await asyncio.Event().wait()
                elif kind == "stubborn":
                    try:
                        await asyncio.Event().wait()
                    except asyncio.CancelledError:
                        await asyncio.sleep(arg)
                        raise
        finally:
            fake.running -= 1

    async def aclose(self) -> None:
        fake = self._llm
        assert isinstance(fake, ScriptedLLM)
        fake.closed += 1
        try:
            await super().aclose()
            await asyncio.Event().wait() if self.close_hangs_for else None
        finally:
            # a plugin waiting for its socket's close handshake in a `finally`: asyncio
            # delivers a cancellation once, so this wait is not cut short
            if self.close_hangs_for:
                await asyncio.sleep(self.close_hangs_for)


async def _cancel_after_steps(scope: trio.CancelScope, steps: int) -> None:
    """Cancel ``scope`` after ``steps`` scheduling rounds (a cancellation landing between
    any two steps of the bridge and of the caller, not at a time)."""
    for _ in range(steps):
        await trio.lowlevel.checkpoint()
    scope.cancel()


async def _pending(bridge: Any) -> list[str]:
    """The asyncio tasks still running on the bridge's loop (checked in the loop itself)."""
    return await bridge.run_sync(
        lambda: [t.get_name() for t in asyncio.all_tasks() if not t.done()])


# -- LLM: every failure, every way of leaving ---------------------------------------------------
LLM_ENDS = ["ok", "api_error", "value_error", "hang"]


@settings(max_examples=60, deadline=None)
@given(chunks=st.integers(0, 3), end=st.sampled_from(LLM_ENDS),
       leave=st.sampled_from(["all", "break", "cancel", "cancel_after_steps"]),
       leave_at=st.integers(0, 8),
       gap=st.sampled_from([0.0, 0.1]))
def test_llm_stream_invariants_whatever_fails_and_however_the_caller_leaves(
        chunks: int, end: str, leave: str, leave_at: int, gap: float) -> None:
    script: list[tuple[str, Any]] = [("sleep", 0.1)]
    for i in range(chunks):
        script += [("chunk", f"w{i}"), ("sleep", gap)]
    if end == "api_error":
        script.append(("fail", LKAPIError("provider down", retryable=False)))
    elif end == "value_error":
        script.append(("fail", ValueError("bad payload")))
    elif end == "hang":
        script.append(("hang", None))
    plugin = ScriptedLLM(script)

    async def main() -> None:
        got: list[str] = []
        errors: list[BaseException] = []
        async with open_bridge() as bridge, trio.open_nursery() as nursery:
            t0 = trio.current_time()
            with trio.move_on_after(5 if leave != "cancel" else 0.05 * leave_at) as scope:
                if leave == "cancel_after_steps":
                    nursery.start_soon(_cancel_after_steps, scope, leave_at)
                try:
                    async with LLMAdapter(plugin, conn_options=NO_RETRY).chat(
                            chat_ctx=_ctx()) as stream:
                        async for chunk in stream:
                            got.append(chunk.content or "")
                            if leave == "break" and len(got) > leave_at % 4:
                                break
                        if leave == "all":
                            # iterating again after the end gives nothing more
                            assert [c async for c in stream] == []
                except APIError as e:
                    errors.append(e)
            assert trio.current_time() - t0 <= 5 + 0.01
            # a prefix of the chunks, in order, each once
            assert got == [f"w{i}" for i in range(len(got))]
            assert len(got) <= chunks
            assert plugin.closed == plugin.opened <= 1
            assert plugin.running == 0
            assert await _pending(bridge) == []
            if errors:
                [error] = errors
                assert end in ("api_error", "value_error")
                assert plugin.label in str(error)
                assert not isinstance(error, BridgeError)
                assert not error.recoverable
            elif end in ("api_error", "value_error") and leave == "all":
                raise AssertionError("the provider's failure was lost")
            if end == "hang" and leave == "all":
                assert scope.cancelled_caught

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("leave", ["end", "cancel"])
async def test_a_plugin_stream_slow_to_close_delays_leaving_by_the_close_grace_at_most(
        autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch,
        leave: str) -> None:
    monkeypatch.setattr(ScriptedLLMStream, "close_hangs_for", 1000.0)
    plugin = ScriptedLLM([("chunk", "a"), ("sleep", 0.5)])
    async with open_bridge() as bridge:
        t0 = trio.current_time()
        with trio.move_on_after(0.2 if leave == "cancel" else 100):
            async with LLMAdapter(plugin).chat(chat_ctx=_ctx()) as stream:
                got = [c.content async for c in stream]
            assert got == ["a"]
        # the documented bound (docs/cancellation.md): the plugin stream's aclose, 5 s
        assert trio.current_time() - t0 <= (0.2 if leave == "cancel" else 0.5) + CLOSE_GRACE
        assert plugin.closed == plugin.opened == 1
        assert plugin.running == 0
        # the close still waiting for its socket is left to the bridge, which ends it
        assert await _pending(bridge) == ["aclose(ScriptedLLMStream)"]
        t1 = trio.current_time()
    assert trio.current_time() - t1 <= bridge.cancel_grace + 0.01


async def test_a_provider_stuck_in_its_cancellation_delays_leaving_by_the_grace_at_most(
        autojump_clock: trio.testing.MockClock) -> None:
    plugin = ScriptedLLM([("chunk", "a"), ("stubborn", 1000.0)])
    async with open_bridge():
        with trio.move_on_after(1):
            async with LLMAdapter(plugin).chat(chat_ctx=_ctx()) as stream:
                async for _ in stream:
                    pass
        left_at = trio.current_time()
        assert left_at <= 1 + CLOSE_GRACE + 0.01
        assert plugin.closed == 1


# -- a scripted TTS ---------------------------------------------------------------------------
def _pcm(ms: int, rate: int = RATE) -> bytes:
    return np.full(rate * ms // 1000, 1000, dtype=np.int16).tobytes()


class ScriptedTTS(lk_tts.TTS[Any]):
    """A streaming TTS whose streams wait for the whole text, then play ``script``:
    ("audio", bytes) pushes audio, ("sleep", s), ("fail", error), ("hang", None).
    ``refuse_text`` makes ``push_text`` raise for a token containing it (a plugin validating
    its input), or ``end_input`` raise if it is ``"<end>"``."""

    def __init__(self, script: list[tuple[str, Any]], *, sample_rate: int = RATE,
                 refuse_text: str | None = None) -> None:
        super().__init__(capabilities=lk_tts.TTSCapabilities(streaming=True),
                         sample_rate=sample_rate, num_channels=1)
        self.script = script
        self.refuse_text = refuse_text
        self.opened = 0
        self.closed = 0
        self.running = 0
        self.texts: list[str] = []

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def provider(self) -> str:
        return "scripted"

    def synthesize(self, text: str, *,
                   conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
                   ) -> lk_tts.ChunkedStream:
        raise NotImplementedError("a streaming TTS")

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
               ) -> lk_tts.SynthesizeStream:
        self.opened += 1
        return ScriptedSynthesizeStream(tts=self, conn_options=conn_options)


class ScriptedSynthesizeStream(lk_tts.SynthesizeStream):
    def push_text(self, token: str) -> None:
        fake = self._tts
        assert isinstance(fake, ScriptedTTS)
        if fake.refuse_text is not None and fake.refuse_text in token:
            raise ValueError(f"cannot synthesize {token!r}")
        super().push_text(token)

    def end_input(self) -> None:
        fake = self._tts
        assert isinstance(fake, ScriptedTTS)
        if fake.refuse_text == "<end>":
            raise ValueError("cannot synthesize the end")
        super().end_input()

    async def _run(self, output_emitter: lk_tts.AudioEmitter) -> None:
        fake = self._tts
        assert isinstance(fake, ScriptedTTS)
        fake.running += 1
        try:
            output_emitter.initialize(request_id="r", sample_rate=fake.sample_rate,
                                      num_channels=1, mime_type="audio/pcm", stream=True)
            output_emitter.start_segment(segment_id="s")
            text = ""
            async for data in self._input_ch:
                if not isinstance(data, self._FlushSentinel):
                    text += data
            fake.texts.append(text)
            self._mark_started()
            for kind, arg in fake.script:
                if kind == "audio":
                    output_emitter.push(arg)
                    output_emitter.flush()
                elif kind == "sleep":
                    await asyncio.sleep(arg)
                elif kind == "fail":
                    raise arg
                elif kind == "hang":
                    await asyncio.Event().wait()
            output_emitter.end_segment()
        finally:
            fake.running -= 1

    async def aclose(self) -> None:
        fake = self._tts
        assert isinstance(fake, ScriptedTTS)
        fake.closed += 1
        await super().aclose()


async def _words(*parts: str, gap: float = 0.0):
    for part in parts:
        await trio.sleep(gap)
        yield part


@pytest.mark.parametrize("refuse", ["\x00", "<end>"])
async def test_tts_plugin_refusing_the_text_fails_the_stream_instead_of_hanging_it(
        autojump_clock: trio.testing.MockClock, refuse: str) -> None:
    plugin = ScriptedTTS([("audio", _pcm(100))], refuse_text=refuse)
    async with open_bridge() as bridge:
        t0 = trio.current_time()
        with trio.move_on_after(60) as scope:
            with pytest.raises(APIError, match="cannot synthesize") as info:
                async with TTSAdapter(plugin, conn_options=NO_RETRY).stream(
                        _words("Hello ", "wor\x00ld.")) as frames:
                    async for _ in frames:
                        pass
        assert not scope.cancelled_caught, "the stream hung after the plugin refused the text"
        assert trio.current_time() - t0 < 1
        assert plugin.label in str(info.value)
        assert isinstance(info.value.__cause__, ValueError)
        assert plugin.closed == plugin.opened == 1
        assert await _pending(bridge) == []


TTS_ENDS = ["ok", "api_error", "value_error", "hang"]


@settings(max_examples=60, deadline=None)
@given(chunks=st.integers(0, 3), end=st.sampled_from(TTS_ENDS),
       leave=st.sampled_from(["all", "break", "cancel", "cancel_after_steps"]),
       leave_at=st.integers(0, 10), text_gap=st.sampled_from([0.0, 0.1]))
def test_tts_stream_invariants_whatever_fails_and_however_the_caller_leaves(
        chunks: int, end: str, leave: str, leave_at: int, text_gap: float) -> None:
    script: list[tuple[str, Any]] = [("sleep", 0.1)]
    for i in range(chunks):
        # each chunk a distinct level, so that a frame delivered twice or out of order shows
        script += [("audio", np.full(RATE // 10, i + 1, dtype=np.int16).tobytes()),
                   ("sleep", 0.1)]
    if end == "api_error":
        script.append(("fail", LKAPIError("voice gone", retryable=False)))
    elif end == "value_error":
        script.append(("fail", ValueError("bad audio")))
    elif end == "hang":
        script.append(("hang", None))
    plugin = ScriptedTTS(script)

    async def main() -> None:
        levels: list[int] = []
        errors: list[BaseException] = []
        async with open_bridge() as bridge, trio.open_nursery() as nursery:
            t0 = trio.current_time()
            with trio.move_on_after(5 if leave != "cancel" else 0.05 * leave_at) as scope:
                if leave == "cancel_after_steps":
                    nursery.start_soon(_cancel_after_steps, scope, leave_at)
                try:
                    async with TTSAdapter(plugin, conn_options=NO_RETRY).stream(
                            _words("Hello ", "there.", gap=text_gap)) as frames:
                        async for f in frames:
                            samples = np.frombuffer(f.data, dtype=np.int16)
                            levels.extend(samples[samples != 0].tolist())
                            if leave == "break" and len(levels) > leave_at * RATE // 40:
                                break
                        if leave == "all":
                            assert [f async for f in frames] == []
                except APIError as e:
                    errors.append(e)
            assert trio.current_time() - t0 <= 5 + 0.01
            # the audio in order, none of it twice
            assert levels == sorted(levels) and set(levels) <= set(range(1, chunks + 1))
            assert all(levels.count(i) <= RATE // 10 for i in set(levels))
            assert plugin.closed == plugin.opened <= 1
            assert plugin.running == 0
            assert await _pending(bridge) == []
            if errors:
                [error] = errors
                assert plugin.label in str(error)
                assert not isinstance(error, BridgeError)
                assert end in ("api_error", "value_error") or chunks == 0
            elif end in ("api_error", "value_error") and leave == "all":
                raise AssertionError("the provider's failure was lost")
            if leave == "all" and not errors and end == "ok":
                assert levels == [i for i in range(1, chunks + 1) for _ in range(RATE // 10)]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- odd provider payloads ----------------------------------------------------------------------
def test_tool_calls_keep_their_provider_data_and_odd_arguments() -> None:
    # Google's thought signature rides on the tool call (and on the delta): the provider
    # refuses the next request if it is not sent back with the call
    signature = {"google": {"thought_signature": "c2ln"}}
    chunk = from_lk_chunk(lk_llm.ChatChunk(id="r1", delta=lk_llm.ChoiceDelta(
        role="assistant", extra={"thinking": "t"},
        tool_calls=[
            lk_llm.FunctionToolCall(name="f", arguments='{"a": 1', call_id="c1",
                                    extra=signature),
            lk_llm.FunctionToolCall(name="g", arguments="", call_id="c2")])))
    first, second = chunk.tool_calls
    assert first.arguments == '{"a": 1'   # invalid JSON is the tool runner's to report
    assert first.extra == signature
    assert (second.arguments, second.extra) == ("{}", None)
    assert chunk.delta is not None and chunk.delta.extra == {"thinking": "t"}
    assert chunk.delta.tool_calls == chunk.tool_calls


def test_empty_deltas_and_usage_only_chunks() -> None:
    empty = from_lk_chunk(lk_llm.ChatChunk(id="r", delta=lk_llm.ChoiceDelta(content="")))
    assert (empty.content, empty.tool_calls, empty.usage) == (None, [], None)
    assert not empty.has_response()
    usage = from_lk_chunk(lk_llm.ChatChunk(id="r", usage=lk_llm.CompletionUsage(
        completion_tokens=3, prompt_tokens=5, total_tokens=8, reasoning_tokens=1)))
    assert (usage.content, usage.tool_calls, usage.delta) == (None, [], None)
    assert usage.usage is not None and (usage.usage.total_tokens,
                                        usage.usage.reasoning_tokens) == (8, 1)
    # provider data alone (a signature chunk) is no response, but is not lost
    meta = from_lk_chunk(lk_llm.ChatChunk(id="r", delta=lk_llm.ChoiceDelta(
        extra={"google": {"thought_signature": "x"}})))
    assert not meta.has_response()
    assert meta.delta is not None and meta.delta.extra == {"google": {"thought_signature": "x"}}


# -- whole-recording STT ------------------------------------------------------------------------
class ScriptedSTT(lk_stt.STT[Any]):
    """A batch STT whose ``recognize`` plays ``script`` (as ScriptedLLM's, "event" returning
    the event given)."""

    def __init__(self, script: list[tuple[str, Any]]) -> None:
        super().__init__(capabilities=lk_stt.STTCapabilities(streaming=False,
                                                             interim_results=False))
        self.script = script
        self.running = 0
        self.calls = 0

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def provider(self) -> str:
        return "scripted"

    async def _recognize_impl(self, buffer: lk_utils.AudioBuffer, *, language: Any = NOT_GIVEN,
                              conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
                              ) -> lk_stt.SpeechEvent:
        self.calls += 1
        self.running += 1
        try:
            for kind, arg in self.script:
                if kind == "sleep":
                    await asyncio.sleep(arg)
                elif kind == "fail":
                    raise arg
                elif kind == "hang":
                    await asyncio.Event().wait()
                elif kind == "event":
                    return arg
            raise AssertionError("the script returns no event")
        finally:
            self.running -= 1


def _final(text: str) -> lk_stt.SpeechEvent:
    return lk_stt.SpeechEvent(type=lk_stt.SpeechEventType.FINAL_TRANSCRIPT,
                              alternatives=[lk_stt.SpeechData(language="en", text=text)])


def _frame(ms: int = 100) -> rtc.AudioFrame:
    samples = RATE * ms // 1000
    return rtc.AudioFrame(_pcm(ms), RATE, 1, samples)


@settings(max_examples=40, deadline=None)
@given(end=st.sampled_from(["ok", "api_error", "value_error", "hang", "usage_only"]),
       cancel_at=st.one_of(st.none(), st.integers(0, 6)))
def test_recognize_invariants_whatever_fails_and_whenever_the_caller_leaves(
        end: str, cancel_at: int | None) -> None:
    script: list[tuple[str, Any]] = [("sleep", 0.2)]
    script.append({
        "ok": ("event", _final("hello")),
        "api_error": ("fail", LKAPIError("stt down", retryable=False)),
        "value_error": ("fail", ValueError("bad audio")),
        "hang": ("hang", None),
        "usage_only": ("event", lk_stt.SpeechEvent(
            type=lk_stt.SpeechEventType.RECOGNITION_USAGE,
            recognition_usage=lk_stt.RecognitionUsage(audio_duration=0.1))),
    }[end])
    plugin = ScriptedSTT(script)

    async def main() -> None:
        results: list[Any] = []
        errors: list[BaseException] = []
        async with open_bridge() as bridge:
            t0 = trio.current_time()
            with trio.move_on_after(2 if cancel_at is None else 0.05 * cancel_at) as scope:
                try:
                    results.append(await RecognizingSTTAdapter(
                        plugin, conn_options=NO_RETRY).recognize([_frame(), _frame()]))
                except APIError as e:
                    errors.append(e)
            assert trio.current_time() - t0 <= 2 + 0.01
            assert plugin.running == 0
            assert await _pending(bridge) == []
            if errors:
                [error] = errors
                assert end in ("api_error", "value_error")
                assert plugin.label in str(error) and not isinstance(error, BridgeError)
            elif results:
                [event] = results
                assert event.type.value == "final_transcript"
                texts = [a.text for a in event.alternatives]
                assert texts == (["hello"] if end == "ok" else [])
            else:
                assert scope.cancelled_caught

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- one adapter, two sessions ----------------------------------------------------------------
async def test_one_adapter_serves_two_sessions_at_once_each_on_its_own_bridge(
        autojump_clock: trio.testing.MockClock) -> None:
    plugin = ScriptedLLM([("sleep", 0.1), ("chunk", "a"), ("sleep", 0.1), ("chunk", "b"),
                          ("sleep", 0.1)])
    tts_plugin = ScriptedTTS([("sleep", 0.1), ("audio", _pcm(100))])
    llm, tts = LLMAdapter(plugin), TTSAdapter(tts_plugin)
    results: dict[str, Any] = {}

    async def session(name: str, cancel_after: float | None) -> None:
        async with open_bridge() as bridge:
            with trio.move_on_after(cancel_after or 100):
                async with llm.chat(chat_ctx=_ctx()) as stream:
                    text = [c.content async for c in stream]
                async with tts.stream(_words(*text)) as frames:
                    audio = sum([int(np.count_nonzero(np.frombuffer(f.data, np.int16)))
                                 async for f in frames])
                results[name] = (text, audio)
            results[name + " pending"] = await _pending(bridge)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(session, "first", None)
        nursery.start_soon(session, "second", 0.15)
    assert results["first"] == (["a", "b"], RATE // 10)
    assert "second" not in results
    assert results["first pending"] == results["second pending"] == []
    assert plugin.closed == plugin.opened == 2
    assert tts_plugin.closed == tts_plugin.opened == 1 and tts_plugin.running == 0


# -- a batch TTS through LiveKit's StreamAdapter, and refusals at the call ----------------------
@pytest.mark.parametrize("fault", ["ok", "fail", "hang"])
@pytest.mark.parametrize("cancel_at", [None, 0.0, 0.05, 0.25, 0.35])
async def test_a_batch_tts_segment_fails_or_is_left_cleanly(
        autojump_clock: trio.testing.MockClock, fault: str, cancel_at: float | None) -> None:
    from lk_fakes import FakePluginTTS

    plugin = FakePluginTTS(streaming=False, ttfb=0.2, seconds_per_char=0.05,
                           fail_with=LKAPIError("quota", retryable=False)
                           if fault == "fail" else None, hang=fault == "hang")
    async with open_bridge() as bridge:
        errors: list[APIError] = []
        with trio.move_on_after(3 if cancel_at is None else cancel_at) as scope:
            try:
                async with TTSAdapter(plugin, conn_options=NO_RETRY).stream(
                        _words("One. ", "Two.", gap=0.1)) as frames:
                    async for _ in frames:
                        pass
            except APIError as e:
                errors.append(e)
        assert await _pending(bridge) == []
        if fault == "fail" and cancel_at is None:
            [error] = errors
            assert "quota" in str(error) and plugin.label in str(error)
        else:
            assert not errors
        assert scope.cancelled_caught == (fault == "hang" or (
            cancel_at is not None and not errors))


async def test_plugins_refusing_the_request_at_the_call_raise_api_errors(
        autojump_clock: trio.testing.MockClock) -> None:
    class RefusingLLM(ScriptedLLM):
        def chat(self, **kwargs: Any) -> lk_llm.LLMStream:
            raise ValueError("unknown model")

    class RefusingTTS(ScriptedTTS):
        def stream(self, **kwargs: Any) -> lk_tts.SynthesizeStream:
            raise LKAPIError("no such voice", retryable=False)

    async with open_bridge() as bridge:
        llm_plugin, tts_plugin = RefusingLLM([]), RefusingTTS([])
        with pytest.raises(APIError, match="unknown model") as llm_error:
            async with LLMAdapter(llm_plugin).chat(chat_ctx=_ctx()):
                raise AssertionError("no stream")
        assert llm_plugin.label in str(llm_error.value)
        with pytest.raises(APIError, match="no such voice"):
            async with TTSAdapter(tts_plugin).stream(_words("hi")):
                raise AssertionError("no stream")
        assert await _pending(bridge) == []


# -- a plugin stream cancelling itself ----------------------------------------------------------
class _SelfCancellingIteration:
    """A plugin stream whose iteration raises ``asyncio.CancelledError`` after its first item
    though nobody cancelled it (it awaited an inner task of its own that it had cancelled)."""

    items = 0

    async def __anext__(self) -> Any:
        self.items += 1
        if self.items > 1:
            inner = asyncio.get_running_loop().create_future()
            inner.cancel()
            await inner   # raises CancelledError into the plugin's own iteration
        return await super().__anext__()  # type: ignore[misc]


class SelfCancellingLLMStream(_SelfCancellingIteration, ScriptedLLMStream):
    pass


class SelfCancellingSynthesizeStream(_SelfCancellingIteration, ScriptedSynthesizeStream):
    pass


@pytest.mark.parametrize("kind", ["llm", "tts"])
async def test_a_plugin_stream_cancelling_itself_fails_as_an_api_error_naming_it(
        autojump_clock: trio.testing.MockClock, kind: str) -> None:
    async with open_bridge() as bridge:
        got: list[Any] = []
        if kind == "llm":
            llm_plugin = ScriptedLLM([("chunk", "a"), ("sleep", 0.1), ("chunk", "b")])
            llm_plugin.chat = lambda **kw: (  # type: ignore[method-assign]
                SelfCancellingLLMStream(llm_plugin, chat_ctx=kw["chat_ctx"], tools=[],
                                        conn_options=NO_RETRY))
            plugin: Any = llm_plugin
            with pytest.raises(APIError) as info:
                async with LLMAdapter(llm_plugin).chat(chat_ctx=_ctx()) as stream:
                    async for chunk in stream:
                        got.append(chunk.content)
        else:
            tts_plugin = ScriptedTTS([("audio", _pcm(20)), ("sleep", 0.1), ("audio", _pcm(20))])
            tts_plugin.stream = lambda **kw: (  # type: ignore[method-assign]
                SelfCancellingSynthesizeStream(tts=tts_plugin, conn_options=NO_RETRY))
            plugin = tts_plugin
            with pytest.raises(APIError) as info:
                async with TTSAdapter(tts_plugin).stream(_words("hi")) as frames:
                    async for frame in frames:
                        got.append(frame)
        assert len(got) == 1
        assert plugin.label in str(info.value)
        assert not isinstance(info.value, BridgeError)
        assert isinstance(info.value.__cause__.__cause__, asyncio.CancelledError)
        assert await _pending(bridge) == []
