"""Hostile ``transcription_node`` overrides against the speech that runs them (696fb72).

The node's output is the reply's transcript: what the transcription output shows, what the
history keeps and what an interruption cuts. Whatever the node does (fail at once, mid-way or
at the end, yield nothing, yield more than it read, yield before reading, lag behind the
audio, never end, return something that is not an async iterator), these must hold:

- the assistant message the history keeps is what the transcription output showed (its
  final text), and at most one is kept per reply;
- an interrupted reply keeps a prefix of what the node makes of the whole reply;
- nothing escapes ``async with session``, the close ends within ``close_grace`` and leaves no
  task running.

LiveKit (livekit-agents 1.8.9, ``voice/agent_activity.py`` ``_tts_task``/``_read_text``
around lines 3334-3420, ``voice/generation.py`` ``_text_forwarding_task``) waits for the
node's forwarding task before the speech ends (``wait_if_not_interrupted(all_tasks)``), so a
node that never ends holds its speech until it is interrupted; on an interruption the
history keeps the synchronizer's ``synchronized_transcript``: what it forwarded to the
transcription output, or everything the node yielded when the playout had completed
(``transcription/synchronizer.py`` ``synchronized_transcript``).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import numpy as np
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from livekit import rtc

from agents_trio import (Agent, AgentSession, FlushSentinel, FunctionToolCall, ModelSettings,
                         RunContext, function_tool)
from agents_trio.io.transcript_sync import TIMED_TRANSCRIPT_KEY, TimedWord
from agents_trio.testing import (FakeActions, FakeAudioInput, FakeAudioOutput,
                                 FakeRealtimeModel, FakeTextOutput, create_session, live_tasks)

LONG = "One two three four five six seven eight nine ten eleven twelve."
AUDIO = 6.0  # seconds of audio the TTS makes of LONG
GRACE = 2.0  # the sessions' close_grace


# -- the nodes ---------------------------------------------------------------------------------

async def _upper(text: AsyncIterable[str]) -> AsyncIterator[str]:
    async for chunk in text:
        yield chunk.upper()


async def _node(kind: str, text: AsyncIterable[str]) -> AsyncIterator[str]:
    """What the node of ``kind`` yields for ``text``."""
    if kind == "raises_at_once":
        raise RuntimeError("transcription node failed")
    if kind == "before_reading":
        yield "Prefix. "
        await trio.sleep(2.0)
    if kind == "leading_space":
        yield "\n  "
    said = 0
    async for chunk in text:
        if kind == "raises_midway" and said >= 12:
            raise RuntimeError("transcription node failed")
        if kind in ("slow", "leading_space"):
            await trio.sleep(0.5)  # a per-chunk call to somewhere (a translation, say)
        said += len(chunk)
        if kind == "nothing":
            continue
        yield chunk.upper() if kind != "more" else chunk
    if kind == "more":
        yield " [end]"
    if kind == "late":
        await trio.sleep(10.0)  # after the 6 s of audio
        yield "LATE."
    if kind == "raises_at_end":
        raise RuntimeError("transcription node failed")
    if kind == "hangs":
        await trio.sleep_forever()


def full_output(kind: str, text: str) -> str:
    """What the node of ``kind`` makes of all of ``text`` (what a cut keeps a prefix of)."""
    if kind in ("raises_at_once", "nothing", "str", "none", "list"):
        return ""
    if kind == "raises_midway":
        return text[:12].upper()  # 3-character chunks: it fails on the fifth
    if kind in ("more", "input"):
        return text + " [end]" if kind == "more" else text
    if kind == "before_reading":
        return "Prefix. " + text.upper()
    if kind == "late":
        return text.upper() + "LATE."
    if kind == "leading_space":
        return "\n  " + text.upper()
    return text.upper()


class Hostile(Agent):
    """An agent whose transcription node behaves as ``kind`` says."""

    def __init__(self, kind: str, **kwargs: Any) -> None:
        super().__init__(instructions="x", **kwargs)
        self.kind = kind

    def transcription_node(self, text: AsyncIterable[str],  # type: ignore[override]
                           model_settings: ModelSettings) -> object:
        kind = self.kind
        if kind == "str":
            return "a string"
        if kind == "none":
            return None
        if kind == "list":
            return ["a", "list"]
        if kind == "coroutine":
            async def resolve() -> AsyncIterator[str]:
                return _upper(text)
            return resolve()
        if kind == "input":  # the input itself, not closed by the node
            return text
        return _node(kind, text)


NODE_KINDS = ["upper", "raises_at_once", "raises_midway", "raises_at_end", "nothing", "more",
              "before_reading", "slow", "late", "hangs", "leading_space", "str", "none",
              "list", "coroutine", "input"]


# -- running a reply and checking it -----------------------------------------------------------

class Outcome:
    def __init__(self, session: AgentSession, agent: Hostile, errors: list[BaseException],
                 leftover: set[Any], close_took: float, done: bool,
                 truncations: list[tuple[str, int, str]]) -> None:
        self.session = session
        self.agent = agent
        self.assistant = [m for m in session.history.messages() if m.role == "assistant"]
        output = session.output.transcription
        self.shown = None if output is None else list(output.messages)  # type: ignore[attr-defined]
        self.errors = errors
        self.leftover = leftover
        self.close_took = close_took
        self.done = done
        self.truncations = truncations

    @property
    def kept(self) -> str:
        return "".join(m.text_content or "" for m in self.assistant)

    def check(self, *, text: str = LONG) -> None:
        """The invariants every reply keeps, whatever its node did."""
        assert len(self.assistant) <= 1, self.assistant
        expected = full_output(self.agent.kind, text).strip()
        assert expected.startswith(self.kept), (self.kept, expected)
        if self.shown is not None:
            shown = [s.strip() for s in self.shown if s.strip()]
            assert shown == ([self.kept] if self.kept else []), (shown, self.kept)
        assert not self.leftover, self.leftover
        assert self.close_took <= GRACE + 1e-6, self.close_took


def _script() -> FakeActions:
    a = FakeActions()
    a.add_llm(LONG, input="hi")
    a.add_tts(AUDIO)
    return a


async def _reply(agent: Hostile, *, mode: str = "audio", interrupt_at: float | None = None,
                 close_at: float | None = None, wait: float = 30.0,
                 session: AgentSession | None = None) -> Outcome:
    """Enter a session, ask ``agent`` for a reply to "hi" on ``mode`` ("audio": audio and
    transcription outputs, "no_output": audio alone, "text": text alone, "realtime" or
    "realtime_text"), interrupt it at ``interrupt_at``, close at ``close_at`` (else once the
    reply ends, or ``wait`` seconds on) and record what came of it."""
    if session is None:
        session = _session(mode)
    errors: list[BaseException] = []
    session.on("error", lambda ev: errors.append(ev.error))
    before = live_tasks()
    done = False
    with trio.fail_after(120):
        async with session:
            await session.start(agent)
            if isinstance(session.input.audio, FakeAudioInput):
                session.input.audio.push(0.1)
            t0 = trio.current_time()
            if mode.startswith("realtime"):
                handle = session.generate_reply(instructions="hi")
            else:
                handle = session.generate_reply(user_input="hi")
            if interrupt_at is not None:
                await trio.sleep_until(t0 + interrupt_at)
                handle.interrupt()
            if close_at is not None:
                await trio.sleep_until(t0 + close_at)
            else:
                with trio.move_on_after(wait):
                    await handle
            done = handle.done()
            closing = trio.current_time()
            await session.aclose()
            close_took = trio.current_time() - closing
    leftover = live_tasks() - before
    truncations: list[tuple[str, int, str]] = []
    model = session.llm
    if isinstance(model, FakeRealtimeModel):
        truncations = [arg for rt in model.sessions for name, arg in rt.calls
                       if name == "truncate"]
    return Outcome(session, agent, errors, leftover, close_took, done, truncations)


def _session(mode: str) -> AgentSession:
    if mode.startswith("realtime"):
        model = FakeRealtimeModel()
        model.add_response("hi", LONG, audio_duration=AUDIO)
        session = AgentSession(llm=model, close_grace=GRACE)
        session.input.audio = FakeAudioInput()
        session.output.audio = FakeAudioOutput() if mode == "realtime" else None
        session.output.transcription = FakeTextOutput()
        return session
    session = create_session(_script(), extra_kwargs={"close_grace": GRACE})
    if mode == "no_output":
        session.output.transcription = None
    elif mode == "text":
        session.output.audio = None
    return session


class Captured(FakeTextOutput):
    """Also keeps each text captured, as it comes."""

    def __init__(self) -> None:
        super().__init__()
        self.captured: list[str] = []

    async def capture_text(self, text: str) -> None:
        self.captured.append(text)
        await super().capture_text(text)


# -- the bugs found ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["hangs", "slow"])
@pytest.mark.parametrize("cut", ["interrupt", "close"])
async def test_a_reply_cut_after_its_audio_played_keeps_what_the_node_made(
        autojump_clock, kind: str, cut: str) -> None:
    # the audio played to its end at 6.5 s; the node lags (slow) or never ends (hangs), so
    # the speech waits for it, as LiveKit's does; then it is cut. The whole audio was heard:
    # the history keeps all the node made by then, which the output showed (it kept
    # nothing: the cut was taken for one before any audio played)
    agent = Hostile(kind)
    if cut == "interrupt":
        out = await _reply(agent, interrupt_at=7.0)
    else:
        out = await _reply(agent, close_at=7.0)
    out.check()
    assert out.kept, out.shown
    if kind == "hangs":
        assert out.kept == LONG.upper()
    assert out.assistant[0].interrupted is True


async def test_a_realtime_message_cut_after_it_played_is_truncated_at_its_end(
        autojump_clock) -> None:
    # as above, on a realtime model: the server was told the user heard nothing of it
    out = await _reply(Hostile("hangs"), mode="realtime", interrupt_at=7.0)
    out.check()
    assert out.kept == LONG.upper()
    [(_, audio_end_ms, transcript)] = out.truncations
    assert abs(audio_end_ms - AUDIO * 1000) <= 1  # (the frames' durations add up to 5.999…)
    assert transcript.strip() == out.kept


@pytest.mark.parametrize("mode", ["audio", "realtime"])
async def test_a_lagging_node_cut_mid_playout_keeps_what_the_output_showed(
        autojump_clock, mode: str) -> None:
    # the node's transcript lags the audio (0.5 s a chunk): the synchronizer paces what it
    # has at the standard rate, and the cut kept fewer words than it had shown (the history
    # spread the partial transcript over the whole audio); a word the node was still
    # making was shown in part
    out = await _reply(Hostile("slow"), mode=mode, interrupt_at=3.5)
    out.check()
    assert out.kept.startswith("ONE TWO"), out.kept
    assert out.shown is not None and out.shown[-1].strip() == out.kept
    words = LONG.upper().split()
    assert all(word in words for word in out.kept.split()), out.kept  # whole words only


@pytest.mark.parametrize("kind", ["slow", "hangs", "default"])
@pytest.mark.parametrize("mode", ["text", "realtime_text"])
async def test_a_text_reply_cut_while_it_is_shown_keeps_what_the_output_showed(
        autojump_clock, kind: str, mode: str) -> None:
    # text output alone: the text was only sent to the output once the segment ended, so a
    # reply cut before then was kept in the history and never shown; a node that never ends
    # showed nothing at all
    if kind == "default":
        a = FakeActions()
        a.add_llm(LONG, input="hi", duration=6.0)  # still streaming at the cut
        session = create_session(a, extra_kwargs={"close_grace": GRACE})
        session.output.audio = None
        if mode == "realtime_text":
            return  # the fake realtime model sends its text at once
        out = await _reply(Hostile("upper"), mode=mode, interrupt_at=3.5, session=session)
    else:
        out = await _reply(Hostile(kind), mode=mode, interrupt_at=3.5)
    out.check()
    assert out.kept, out.shown
    assert out.assistant[0].interrupted is True


@pytest.mark.parametrize("mode", ["text", "realtime_text"])
async def test_a_text_reply_whose_node_never_ends_is_shown_as_it_is_made(
        autojump_clock, mode: str) -> None:
    # LiveKit's text forwarding sends each piece the node yields at once
    agent = Hostile("hangs")
    session = _session(mode)
    output = Captured()
    session.output.transcription = output
    async with session:
        await session.start(agent)
        handle = session.generate_reply(**({"instructions": "hi"} if mode == "realtime_text"
                                           else {"user_input": "hi"}))
        await trio.sleep(5.0)
        assert "".join(output.captured) == LONG.upper()  # shown, not yet flushed
        assert not handle.done()  # the node holds it, as in LiveKit
    assert output.messages == [LONG.upper()]  # the close ended the segment


async def test_a_node_with_leading_whitespace_that_lags_is_shown_whole(autojump_clock) -> None:
    # the synchronizer's words dropped the node's leading whitespace, so what it released
    # was no prefix of the transcript and the end of the segment added nothing to it
    out = await _reply(Hostile("leading_space"))
    out.check()
    assert out.kept == LONG.upper()
    assert out.assistant[0].interrupted is False


# -- what holds already ------------------------------------------------------------------------

async def test_a_node_that_never_ends_holds_its_speech_until_interrupted(autojump_clock) -> None:
    # as in LiveKit: the speech waits for the node's forwarding
    out = await _reply(Hostile("hangs"), wait=30.0)
    assert not out.done
    out.check()  # the close cut it: within the grace, nothing left running
    assert out.kept == LONG.upper()


@pytest.mark.parametrize("kind", ["str", "none", "list"])
@pytest.mark.parametrize("mode", ["audio", "text", "realtime"])
async def test_a_node_returning_no_async_iterable_makes_no_transcript(
        autojump_clock, kind: str, mode: str) -> None:
    # LiveKit: None is no text; a str or a list fails its forwarding task. Here: no text,
    # the reply still plays, nothing is kept, nothing escapes
    out = await _reply(Hostile(kind), mode=mode)
    out.check()
    assert out.done and out.kept == ""


@pytest.mark.parametrize("mode", ["audio", "text", "realtime", "realtime_text"])
async def test_a_node_returning_a_coroutine_or_its_input_works(autojump_clock, mode: str) -> None:
    for kind, kept in (("coroutine", LONG.upper()), ("input", LONG)):
        out = await _reply(Hostile(kind), mode=mode)
        out.check()
        assert out.done and out.kept == kept, (kind, out.kept)


@pytest.mark.parametrize("kind", ["raises_at_once", "raises_midway", "raises_at_end"])
@pytest.mark.parametrize("mode", ["audio", "text", "realtime"])
async def test_a_failing_node_is_one_error_and_keeps_what_it_made(
        autojump_clock, kind: str, mode: str) -> None:
    out = await _reply(Hostile(kind), mode=mode)
    out.check()
    assert [str(e) for e in out.errors] == ["transcription node failed"]
    assert out.kept == full_output(kind, LONG).strip()


@pytest.mark.parametrize("kind", NODE_KINDS)
@pytest.mark.parametrize("mode", ["audio", "no_output", "text", "realtime", "realtime_text"])
@pytest.mark.parametrize("cut", [None, 0.05, 0.45, 3.5, 6.45, 6.55, 9.0])
async def test_every_node_at_every_cut_keeps_the_invariants(
        autojump_clock, kind: str, mode: str, cut: float | None) -> None:
    out = await _reply(Hostile(kind), mode=mode, interrupt_at=cut, wait=15.0)
    out.check()


@settings(deadline=None, max_examples=40, database=None, print_blob=False,
          suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(NODE_KINDS),
       mode=st.sampled_from(["audio", "no_output", "text", "realtime", "realtime_text"]),
       cut=st.one_of(st.none(), st.floats(0.0, 12.0)),
       close=st.booleans(),
       _=st.random_module())  # seeds Trio's scheduler (its tie breaks) per example
def test_any_node_cut_at_any_time_keeps_the_invariants(kind: str, mode: str,
                                                       cut: float | None, close: bool,
                                                       _: object) -> None:
    async def main() -> None:
        if close and cut is not None:
            out = await _reply(Hostile(kind), mode=mode, close_at=cut)
        else:
            out = await _reply(Hostile(kind), mode=mode, interrupt_at=cut, wait=15.0)
        out.check()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- the node beside the rest of the speech ----------------------------------------------------

class Segmented(Hostile):
    """Its LLM node says two segments (a flush between)."""

    async def llm_node(self, chat_ctx: Any, tools: Any, model_settings: ModelSettings
                       ) -> AsyncIterator[str | FlushSentinel]:
        yield "Hello there. "
        yield FlushSentinel()
        yield "How are you today my friend?"


@pytest.mark.parametrize("kind", ["upper", "slow", "late"])
@pytest.mark.parametrize("cut", [None, 0.7, 1.5, 2.5, 3.05])
async def test_segments_each_go_through_the_node(autojump_clock, kind: str,
                                                 cut: float | None) -> None:
    a = FakeActions()
    a.add_tts(1.0, input="Hello there. ", ttfb=0.1, duration=0.1)
    a.add_tts(2.0, input="How are you today my friend?", ttfb=0.1, duration=0.1)
    session = create_session(a, extra_kwargs={"close_grace": GRACE})
    out = await _reply(Segmented(kind), interrupt_at=cut, session=session)
    text = "Hello there. How are you today my friend?"
    assert len(out.assistant) <= 1
    if kind != "late":
        assert text.upper().startswith(out.kept), out.kept
    assert out.shown is not None
    assert "".join(out.shown).strip() == out.kept
    assert not out.leftover
    if cut is None and kind == "upper":
        assert out.kept == text.upper()


class Tooled(Hostile):
    @function_tool
    async def lookup(self, ctx: RunContext) -> str:
        """Look it up."""
        await trio.sleep(1.0)
        return "found"


@pytest.mark.parametrize("kind", ["upper", "slow", "raises_midway"])
@pytest.mark.parametrize("mode", ["audio", "text"])
async def test_a_tool_call_in_the_reply_is_answered_once_and_both_replies_go_through_the_node(
        autojump_clock, kind: str, mode: str) -> None:
    a = FakeActions()
    a.add_llm("Let me look.", [FunctionToolCall(name="lookup", arguments="{}", call_id="c1")],
              input="hi")
    a.add_tts(1.0)
    a.add_llm("It is found.", input="found")
    a.add_tts(1.0)
    session = create_session(a, extra_kwargs={"close_grace": GRACE})
    if mode == "text":
        session.output.audio = None
    out = await _reply(Tooled(kind), mode=mode, session=session)
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [o.call_id for o in outputs] == ["c1"]
    kept = [m.text_content for m in out.assistant]
    shown = [s.strip() for s in out.shown or [] if s.strip()]
    assert kept == shown
    if kind != "raises_midway":
        assert kept == ["LET ME LOOK.", "IT IS FOUND."]
    assert not out.leftover


class Sales(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="sales")

    async def on_enter(self) -> None:
        self.session.say("Sales here.")


class Handing(Hostile):
    @function_tool
    async def transfer(self, ctx: RunContext) -> Any:
        """Transfer to sales."""
        return Sales(), "transferring"


@pytest.mark.parametrize("kind", ["upper", "slow", "late"])
async def test_a_handoff_while_the_node_runs_waits_for_the_reply(autojump_clock,
                                                                 kind: str) -> None:
    # the tool hands off while the reply that called it still plays through the node: the
    # drain lets it finish (its transcript whole), then sales greets
    a = FakeActions()
    a.add_llm(LONG, [FunctionToolCall(name="transfer", arguments="{}", call_id="t1")],
              input="hi")
    a.add_tts(AUDIO)
    a.add_llm("Bye.", input="transferring")
    a.add_tts(0.5)
    a.add_tts(1.0, input="Sales here.")
    session = create_session(a, extra_kwargs={"close_grace": GRACE})
    out = await _reply(Handing(kind), session=session, close_at=30.0)
    kept = [m.text_content for m in out.assistant]
    assert kept[0] == full_output(kind, LONG).strip()
    assert kept[-1] == "Sales here."
    shown = [s.strip() for s in out.shown or [] if s.strip()]
    assert shown == kept
    assert session.current_agent.instructions == "sales"
    assert not out.leftover


async def _words() -> AsyncIterator[str]:
    for word in LONG.split(" "):
        await trio.sleep(0.1)
        yield word + " "


@pytest.mark.parametrize("kind", ["upper", "slow", "hangs", "more"])
@pytest.mark.parametrize("cut", [None, 1.0, 3.0, 7.5])
async def test_say_with_a_text_iterator_goes_through_the_node(autojump_clock, kind: str,
                                                              cut: float | None) -> None:
    a = FakeActions()
    a.add_tts(AUDIO, input=LONG)
    session = create_session(a, extra_kwargs={"close_grace": GRACE})
    before = live_tasks()
    async with session:
        await session.start(Hostile(kind))
        speech = session.say(_words())
        if cut is not None:
            await trio.sleep(cut)
            speech.interrupt()
        with trio.move_on_after(20):
            await speech
    assert not live_tasks() - before
    kept = [m.text_content or "" for m in session.history.messages() if m.role == "assistant"]
    assert len(kept) <= 1
    shown = [s.strip() for s in session.output.transcription.messages if s.strip()]
    assert shown == kept
    said = "".join(word + " " for word in LONG.split(" "))
    assert full_output(kind, said).strip().startswith("".join(kept))
    if cut is None and kind != "hangs":
        assert kept == [full_output(kind, said).strip()]


class Stamped(Hostile):
    """Its TTS gives word timestamps (one a second), for the LLM's words."""

    async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                       ) -> AsyncIterator[rtc.AudioFrame]:
        words = ""
        async for chunk in text:
            words += chunk
        stamps = [TimedWord(text=w, start_time=float(i)) for i, w in enumerate(words.split())]
        for i in range(int(AUDIO * 10)):
            frame = rtc.AudioFrame(np.zeros(2400, np.int16).tobytes(), 24000, 1, 2400)
            if i == 0:
                frame.userdata[TIMED_TRANSCRIPT_KEY] = stamps
            yield frame


@pytest.mark.parametrize("kind", ["upper", "more", "slow", "before_reading"])
@pytest.mark.parametrize("cut", [None, 2.5, 4.5, 6.6])
async def test_tts_aligned_transcripts_keep_what_was_shown(autojump_clock, kind: str,
                                                           cut: float | None) -> None:
    session = _session("audio")
    out = await _reply(Stamped(kind, use_tts_aligned_transcript=True), interrupt_at=cut,
                       session=session)
    out.check()


# -- a JSON node (LiveKit's structured_output example) cut before it spoke --------------------

class ResponseOnly(Hostile):
    def transcription_node(self, text: AsyncIterable[str],  # type: ignore[override]
                           model_settings: ModelSettings) -> object:
        async def node() -> AsyncIterator[str]:
            so_far = ""
            async for chunk in text:
                so_far += chunk
            yield json.loads(so_far)["response"]
        return node()


@pytest.mark.parametrize("cut", [0.3, 1.0, 2.9, math.inf])
async def test_a_node_that_speaks_only_at_its_end(autojump_clock, cut: float) -> None:
    reply = json.dumps({"mood": "calm", "response": "All good here."})
    a = FakeActions()
    a.add_llm(reply, input="hi")
    a.add_tts(3.0)
    session = create_session(a, extra_kwargs={"close_grace": GRACE})
    out = await _reply(ResponseOnly("upper"), session=session,
                       interrupt_at=None if cut == math.inf else cut)
    assert "All good here.".startswith(out.kept)
    assert [s.strip() for s in out.shown or [] if s.strip()] == ([out.kept] if out.kept else [])
    if cut == math.inf:
        assert out.kept == "All good here."


# -- a realtime message whose text lags its audio ----------------------------------------------

@pytest.mark.parametrize("kind", ["default", "upper"])
async def test_a_realtime_message_whose_text_lags_its_audio_is_kept_whole(
        autojump_clock, kind: str) -> None:
    # a message with no audio (or less than its text takes to arrive) ended its playout
    # before its text had all arrived: the history kept the first delta ("hel"); LiveKit's
    # speech waits for its text forwarding before it ends
    model = FakeRealtimeModel()
    model.add_response("hi", "hello from the desk", audio_duration=0.0)
    session = AgentSession(llm=model, close_grace=GRACE)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()
    session.output.transcription = FakeTextOutput()
    agent = Agent(instructions="x") if kind == "default" else Hostile("upper")
    async with session:
        await session.start(agent)
        with trio.fail_after(10):
            await session.generate_reply(instructions="hi")
    said = "hello from the desk" if kind == "default" else "HELLO FROM THE DESK"
    assert [m.text_content for m in session.history.messages()
            if m.role == "assistant"] == [said]
    assert [s.strip() for s in session.output.transcription.messages] == [said]


async def test_a_handoff_behind_a_node_that_never_ends_waits_until_the_close(
        autojump_clock) -> None:
    # as in LiveKit, the departing agent's drain waits for its speech, which waits for the
    # node: the handoff never completes; the close still ends within its grace, keeps the
    # reply the user heard and leaves nothing running
    a = FakeActions()
    a.add_llm(LONG, [FunctionToolCall(name="transfer", arguments="{}", call_id="t1")],
              input="hi")
    a.add_tts(AUDIO)
    session = create_session(a, extra_kwargs={"close_grace": GRACE})
    out = await _reply(Handing("hangs"), session=session, close_at=30.0)
    out.check()
    assert out.kept == LONG.upper()
    assert isinstance(session.current_agent, Handing)
    assert [o.call_id for o in session.history.items if o.type == "function_call_output"] \
        == ["t1"]
