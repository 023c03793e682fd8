"""Hypothesis strategies for conversation schedules (this module imports ``hypothesis``).

``conversations(...)`` draws a :class:`~agents_trio.testing.Schedule`: user speech and typed
text at random times (also while tools run and replies play), ``session.run`` calls,
interruptions, LLM replies calling your tools with injected latency and failures, model
faults of every kind, and a close at a random moment. Times are drawn on a 50 ms grid, so a
falsifying schedule shrinks to round, readable numbers.

    from hypothesis import given
    from agents_trio.testing import check_conversation
    from agents_trio.testing.strategies import conversations

    @given(conversations(tools={"book_table": {"time": "7pm"}}))
    def test_my_agent(schedule):
        check_conversation(MyAgent, schedule)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

from .schedules import (DEFAULT_REPLY, Action, Fault, FaultKind, Interrupt, OutputFault, PushFault, Reply,
                        RunInput, Schedule, StreamFault, TextInput, ToolCall, ToolOutcomeKind,
                        UserSpeech)

__all__ = ["ALL_FAULTS", "ALL_TOOL_OUTCOMES", "PHRASES", "conversations", "faults", "replies",
           "seconds", "tool_calls"]

PHRASES = ("hello there", "what's the weather in Paris", "can you check my order",
           "tell me a story", "stop", "book a table for two", "thanks, that's all")
ALL_FAULTS: tuple[FaultKind, ...] = ("error", "api_error", "recoverable_api_error", "hang")
ALL_TOOL_OUTCOMES: tuple[ToolOutcomeKind, ...] = ("ok", "raise_before", "raise_after",
                                                  "tool_error", "hang")

T = TypeVar("T")


def seconds(lo: float, hi: float, step: float = 0.05) -> st.SearchStrategy[float]:
    """Seconds on a ``step`` grid from ``lo`` to ``hi``, shrinking towards ``lo``."""
    return st.integers(round(lo / step), round(hi / step)).map(lambda k: round(k * step, 3))


@st.composite
def _sometimes(draw: st.DrawFn, strategy: st.SearchStrategy[T], weight: int = 4) -> T | None:
    """``strategy`` about once in ``weight`` draws, else None (shrinks to None)."""
    return draw(strategy) if draw(st.integers(0, weight - 1)) == weight - 1 else None


def faults(kinds: Sequence[FaultKind], *, max_index: int = 6) -> st.SearchStrategy[Fault | None]:
    """A model fault of one of ``kinds`` at chunk/frame 0..``max_index`` (often None)."""
    if not kinds:
        return st.none()
    return _sometimes(st.builds(Fault, kind=st.sampled_from(list(kinds)),
                                at=st.integers(0, max_index)), weight=6)


@st.composite
def tool_calls(draw: st.DrawFn, tools: Mapping[str, Any], *, depth: int,
               outcomes: Sequence[ToolOutcomeKind], max_latency: float, max_shield: float,
               llm_faults: Sequence[FaultKind], tts_faults: Sequence[FaultKind],
               min_calls: int = 0) -> ToolCall:
    """One call of one of ``tools`` (name -> arguments: a dict, or a strategy of dicts), with
    its injected behaviour and (sometimes) the reply to its output."""
    name = draw(st.sampled_from(sorted(tools)))
    spec = tools[name]
    arguments = draw(spec) if isinstance(spec, st.SearchStrategy) else (spec or {})
    return ToolCall(
        name=name, arguments=json.dumps(arguments), latency=draw(seconds(0.0, max_latency)),
        outcome=draw(st.sampled_from(list(outcomes))) if outcomes else "ok",
        shield=draw(seconds(0.0, max_shield)) if max_shield > 0 else 0.0,
        reply=draw(_sometimes(replies(tools, depth=depth - 1, outcomes=outcomes,
                                      max_latency=max_latency, max_shield=max_shield,
                                      llm_faults=llm_faults, tts_faults=tts_faults,
                                      min_calls=min_calls), weight=2)))


_WORDS = ("okay.", "sure, one moment.", "here is what I found about that.",
          "let me tell you a rather long story about the sea and the ships on it.")


@st.composite
def replies(draw: st.DrawFn, tools: Mapping[str, Any] | None = None, *, depth: int = 1,
            outcomes: Sequence[ToolOutcomeKind] = ALL_TOOL_OUTCOMES, max_latency: float = 5.0,
            max_shield: float = 0.0, llm_faults: Sequence[FaultKind] = ALL_FAULTS,
            tts_faults: Sequence[FaultKind] = ALL_FAULTS, max_calls: int = 2,
            min_calls: int = 0) -> Reply:
    """An LLM reply: words, timings, ``min_calls`` to ``max_calls`` tool calls (while
    ``depth`` > 0; a call's own reply may call tools again), audio, and sometimes an LLM or
    TTS fault."""
    ttft = draw(seconds(0.0, 0.5))
    calls: tuple[ToolCall, ...] = ()
    if tools and depth > 0:
        calls = tuple(draw(st.lists(tool_calls(
            tools, depth=depth, outcomes=outcomes, max_latency=max_latency,
            max_shield=max_shield, llm_faults=llm_faults, tts_faults=tts_faults,
            min_calls=min_calls), min_size=min(min_calls, max_calls), max_size=max_calls)))
    return Reply(text=draw(st.sampled_from(_WORDS)), ttft=ttft,
                 duration=round(ttft + draw(seconds(0.0, 1.0)), 3), calls=calls,
                 audio=draw(seconds(0.2, 6.0)), tts_ttfb=draw(seconds(0.0, 0.5)),
                 llm_fault=draw(faults(llm_faults)), tts_fault=draw(faults(tts_faults)))


@st.composite
def conversations(
        draw: st.DrawFn, *, tools: Mapping[str, Any] | None = None,
        phrases: Sequence[str] = PHRASES, max_actions: int = 6, max_gap: float = 8.0,
        max_calm_gap: float = 20.0,
        speech: bool = True, text: bool = True, runs: bool = False,
        interruptions: bool = True, tool_outcomes: Sequence[ToolOutcomeKind] = ALL_TOOL_OUTCOMES,
        max_tool_latency: float = 5.0, max_shield: float = 1.0, tool_depth: int = 2,
        min_calls: int = 0,
        llm_faults: Sequence[FaultKind] = ALL_FAULTS,
        tts_faults: Sequence[FaultKind] = ALL_FAULTS,
        stream_faults: Sequence[FaultKind] = ("error", "api_error", "recoverable_api_error"),
        push_faults: Sequence[FaultKind] = ("error", "api_error"),
        output_faults: Sequence[FaultKind] = ("hang", "error"),
        fault_models: Sequence[str] = ("stt", "vad"),
        greeting_faults: bool = True, max_close_delay: float = 8.0,
        audio_output: bool | None = True, can_pause_audio: bool | None = None,
        preemptive: bool | None = None, faults: bool = True) -> Schedule:
    """A random conversation schedule.

    Args:
        tools: The tools the LLM may call: name -> arguments (a dict, or a strategy of
            dicts). Without tools, replies are words only.
        phrases: What the user says or types; each input gets ``" (<n>)"`` appended so every
            input is distinct.
        max_actions: Up to this many actions (at least one).
        max_gap: The longest pause between two actions (seconds).
        max_calm_gap: Half of the schedules are *calm*: 3 s to this long between actions
            (and to the close), so inputs have time to be answered (0: always busy).
        speech, text, runs, interruptions: Which kinds of action to draw (user speech, typed
            text, ``session.run``, ``session.interrupt``).
        tool_outcomes: What may happen around a tool execution (see ``ToolOutcomeKind``);
            empty means always ``ok``.
        max_tool_latency: The longest injected latency before a tool runs.
        max_shield: The longest shielded time after a tool returns (0 disables it).
        tool_depth: How many tool rounds one reply may chain.
        min_calls: Each reply (within ``tool_depth``) calls at least this many tools.
        llm_faults, tts_faults: Fault kinds of LLM and TTS streams (empty: none).
        stream_faults: Fault kinds of STT and VAD streams while read (empty: none).
        push_faults: Fault kinds of STT and VAD ``push_frame`` (empty: none).
        fault_models: Which recognition models stream and push faults hit.
        output_faults: Fault kinds of the audio output's ``capture_frame`` (empty: none).
        greeting_faults: Whether the reply to instructions (``on_enter``) may fail too.
        max_close_delay: The longest time from the last action to the close.
        audio_output, can_pause_audio, preemptive: Fixed values, or None to draw them.
        faults: False turns every fault off at once (model faults and tool failures; tool
            latencies stay): a good first run for a new agent.
    """
    if not faults:
        tool_outcomes, llm_faults, tts_faults = ("ok",), (), ()
        stream_faults, push_faults, output_faults = (), (), ()
    kinds = [k for k, on in (("speech", speech), ("text", text), ("run", runs),
                             ("interrupt", interruptions)) if on]
    if not kinds:
        raise ValueError("conversations() needs at least one kind of action")
    reply_kwargs: dict[str, Any] = dict(outcomes=tool_outcomes, max_latency=max_tool_latency,
                        max_shield=max_shield, llm_faults=llm_faults, tts_faults=tts_faults,
                        min_calls=min_calls if tools else 0)
    # a busy conversation piles actions on each other; a calm one leaves each input time to
    # be answered (so the liveness invariants get something to check)
    calm = max_calm_gap > 0 and draw(st.booleans())
    lo, hi = (3.0, max_calm_gap) if calm else (0.0, max_gap)
    # a list of steps, so that shrinking deletes any step (not only the last ones)
    steps = draw(st.lists(_step(kinds, phrases, lo, hi, replies(tools, depth=tool_depth,
                                                                **reply_kwargs)),
                          min_size=1, max_size=max_actions))
    actions: list[Action] = []
    t = 0.0
    for i, (gap, kind, phrase, reply, noise, duration, stt_delay, force) in enumerate(steps):
        t = round(t + max(gap, 0.5 if i == 0 else 0.0), 3)
        words = f"{phrase} ({i})"
        if kind == "speech":
            actions.append(UserSpeech(at=t, duration=duration, transcript="" if noise else words,
                                      stt_delay=stt_delay, reply=reply))
            t = round(t + duration, 3)
        elif kind == "text":
            actions.append(TextInput(at=t, text=words, reply=reply))
        elif kind == "run":
            actions.append(RunInput(at=t, text=words, reply=reply))
        else:
            actions.append(Interrupt(at=t, force=force))
    close_at = round(t + draw(seconds(0.0, max_close_delay + (hi if calm else 0.0))), 3)
    greeting_kwargs = reply_kwargs if greeting_faults else {
        **reply_kwargs, "llm_faults": (), "tts_faults": ()}
    return Schedule(
        actions=tuple(actions),
        faults=tuple(draw(_input_faults(close_at, stream_faults, push_faults, output_faults,
                                        fault_models))),
        close_at=close_at,
        greeting=draw(replies(tools, depth=tool_depth, **greeting_kwargs)),
        audio_output=draw(st.booleans()) if audio_output is None else audio_output,
        can_pause_audio=draw(st.booleans()) if can_pause_audio is None else can_pause_audio,
        preemptive=draw(st.booleans()) if preemptive is None else preemptive)


@st.composite
def _step(draw: st.DrawFn, kinds: list[str], phrases: Sequence[str], lo: float, hi: float,
          reply: st.SearchStrategy[Reply]) -> tuple[Any, ...]:
    """The raw draw of one action: gap before it, kind, words, speech details, and a reply
    (only for actions with words: interruptions and noise get none)."""
    gap, kind = draw(seconds(lo, hi)), draw(st.sampled_from(kinds))
    noise = kind == "speech" and draw(st.integers(0, 4)) == 4
    duration = draw(seconds(0.1, 3.0)) if kind == "speech" else 0.0
    stt_delay = draw(seconds(0.0, 0.5)) if kind == "speech" else 0.0
    force = kind == "interrupt" and draw(st.booleans())
    words = kind != "interrupt" and not noise
    return (gap, kind, draw(st.sampled_from(list(phrases))) if words else "",
            draw(reply) if words else DEFAULT_REPLY, noise, duration, stt_delay, force)


def _input_faults(close_at: float, stream: Sequence[FaultKind], push: Sequence[FaultKind],
                  output: Sequence[FaultKind], fault_models: Sequence[str]
                  ) -> st.SearchStrategy[list[Any]]:
    options: list[st.SearchStrategy[Any]] = []
    at = seconds(0.0, max(close_at, 0.05))
    models = st.sampled_from(list(fault_models))
    if stream and fault_models:
        options.append(st.builds(StreamFault, model=models, at=at,
                                 kind=st.sampled_from(list(stream))))
    if push and fault_models:
        options.append(st.builds(PushFault, model=models, at=at,
                                 kind=st.sampled_from(list(push))))
    if output:
        options.append(st.builds(OutputFault, at=at, kind=st.sampled_from(list(output))))
    if not options:
        return st.just([])
    return _sometimes(st.lists(st.one_of(options), min_size=1, max_size=2),
                      weight=3).map(lambda x: x or [])
