"""``result.expect`` probed against LiveKit's own ``RunAssert`` (livekit-agents 1.8.9,
``livekit/agents/voice/run_result.py``), the way a LiveKit test suite hits it.

Each probe runs the same operation on the same events in both runtimes (LiveKit's
``RunAssert`` only reads ``run_result.events``, so it is given a plain namespace) and compares
the outcome: what it returned (the assert class) or which exception it raised, and where the
cursor ended. The differences that remain are listed in ``DELIBERATE`` with why; each is
documented in docs/livekit-names.md ("The `expect` DSL").

Written for agents_trio; nothing here is copied from LiveKit's tests.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("livekit.agents")

from livekit.agents import Agent as LkAgent  # noqa: E402
from livekit.agents import NOT_GIVEN as LK_NOT_GIVEN  # noqa: E402
from livekit.agents import llm as lk_llm  # noqa: E402
from livekit.agents.voice import run_result as lk  # noqa: E402

from agents_trio import NOT_GIVEN, Agent  # noqa: E402
from agents_trio import run_result as ours  # noqa: E402
from agents_trio.chat import (AgentHandoff, ChatMessage, FunctionCall,  # noqa: E402
                              FunctionCallOutput)
from agents_trio.testing import RunAssert  # noqa: E402


class LkKelly(LkAgent):
    def __init__(self) -> None:
        super().__init__(instructions="x")


class Kelly(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")


# message, call, its output, a handoff, message
RUN = [("msg", "Hello there"), ("call", "lookup", '{"city": "Paris", "n": 1}'),
       ("out", "lookup", "sunny", False), ("handoff",), ("msg", "It is sunny")]


def _lk_events(spec: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = []
    for s in spec:
        if s[0] == "msg":
            out.append(lk.ChatMessageEvent(item=lk_llm.ChatMessage(role="assistant",
                                                                   content=[s[1]])))
        elif s[0] == "call":
            out.append(lk.FunctionCallEvent(item=lk_llm.FunctionCall(
                call_id="c1", name=s[1], arguments=s[2])))
        elif s[0] == "out":
            out.append(lk.FunctionCallOutputEvent(item=lk_llm.FunctionCallOutput(
                call_id="c1", name=s[1], output=s[2], is_error=s[3])))
        else:
            out.append(lk.AgentHandoffEvent(item=lk_llm.AgentHandoff(
                new_agent_id="b", old_agent_id="a"), old_agent=None, new_agent=LkKelly()))
    return out


def _our_events(spec: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = []
    for s in spec:
        if s[0] == "msg":
            out.append(ours.ChatMessageEvent(ChatMessage(role="assistant", content=[s[1]])))
        elif s[0] == "call":
            out.append(ours.FunctionCallEvent(FunctionCall(call_id="c1", name=s[1],
                                                           arguments=s[2])))
        elif s[0] == "out":
            out.append(ours.FunctionCallOutputEvent(FunctionCallOutput(
                call_id="c1", name=s[1], output=s[2], is_error=s[3])))
        else:
            out.append(ours.AgentHandoffEvent(AgentHandoff(new_agent_id="b", old_agent_id="a"),
                                              None, Kelly()))
    return out


Op = Callable[[Any, type, Any], object]


def _outcome(expect: Any, op: Op, agent_cls: type, not_given: object
             ) -> tuple[str, str, int]:
    try:
        returned = op(expect, agent_cls, not_given)
    except Exception as exc:  # noqa: BLE001 - the probe compares what is raised
        return ("raises", type(exc).__name__, expect._current_index)  # noqa: SLF001
    return ("returns", type(returned).__name__, expect._current_index)  # noqa: SLF001


def both(op: Op, spec: list[tuple[Any, ...]] = RUN) -> tuple[tuple[str, str, int], ...]:
    lk_expect = lk.RunAssert(types.SimpleNamespace(events=_lk_events(spec)))
    our_expect = RunAssert(_our_events(spec))
    return (_outcome(lk_expect, op, LkKelly, LK_NOT_GIVEN),
            _outcome(our_expect, op, Kelly, NOT_GIVEN))


PROBES: dict[str, Op] = {
    "next_event": lambda e, A, NG: e.next_event(),
    "next_event typed": lambda e, A, NG: e.next_event(type="function_call"),
    "next_event typed, none of that type left": lambda e, A, NG: (
        e.skip_next(2), e.next_event(type="function_call"))[1],
    "next_event unknown type": lambda e, A, NG: e.next_event(type="bogus"),
    "next_event past the end": lambda e, A, NG: [e.next_event() for _ in range(6)],
    "is_message wrong role": lambda e, A, NG: e.next_event().is_message(role="user"),
    "is_message on a call": lambda e, A, NG: e[1].is_message(),
    "is_message role NOT_GIVEN": lambda e, A, NG: e[0].is_message(role=NG),
    "is_function_call subset": lambda e, A, NG: e[1].is_function_call(
        name="lookup", arguments={"city": "Paris"}),
    "is_function_call missing key": lambda e, A, NG: e[1].is_function_call(
        arguments={"zip": None}),
    "is_function_call wrong value": lambda e, A, NG: e[1].is_function_call(arguments={"n": 2}),
    "is_function_call 1 == 1.0 == True": lambda e, A, NG: (
        e[1].is_function_call(arguments={"n": 1.0}), e[1].is_function_call(arguments={"n": True})),
    "is_function_call arguments as a list": lambda e, A, NG: e[1].is_function_call(
        arguments=[("city", "Paris")]),
    "is_function_call wrong name": lambda e, A, NG: e[1].is_function_call(name="other"),
    "is_function_call NOT_GIVEN": lambda e, A, NG: e[1].is_function_call(name=NG,
                                                                          arguments=NG),
    "is_function_call on a message": lambda e, A, NG: e[0].is_function_call(),
    "is_function_call_output": lambda e, A, NG: e[2].is_function_call_output(
        output="sunny", is_error=False),
    "is_function_call_output is_error=0": lambda e, A, NG: e[2].is_function_call_output(
        is_error=0),
    "is_function_call_output wrong output": lambda e, A, NG: e[2].is_function_call_output(
        output="rain"),
    "is_function_call_output wrong flag": lambda e, A, NG: e[2].is_function_call_output(
        is_error=True),
    "is_agent_handoff": lambda e, A, NG: e[3].is_agent_handoff(new_agent_type=A),
    "is_agent_handoff wrong class": lambda e, A, NG: e[3].is_agent_handoff(new_agent_type=int),
    "is_agent_handoff a name, not a class": lambda e, A, NG: e[3].is_agent_handoff(
        new_agent_type="Kelly"),
    "is_agent_handoff NOT_GIVEN": lambda e, A, NG: e[3].is_agent_handoff(new_agent_type=NG),
    "[-1]": lambda e, A, NG: e[-1].is_message(role="assistant"),
    "[5] out of range": lambda e, A, NG: e[5],
    "[-6] out of range": lambda e, A, NG: e[-6],
    "['0']": lambda e, A, NG: e["0"],
    "[0.0]": lambda e, A, NG: e[0.0],
    "[True]": lambda e, A, NG: e[True],
    "[1:3] contains call": lambda e, A, NG: e[1:3].contains_function_call(name="lookup"),
    "[1:3] contains no message": lambda e, A, NG: e[1:3].contains_message(),
    "[-2:] contains message": lambda e, A, NG: e[-2:].contains_message(role="assistant"),
    "[10:] empty": lambda e, A, NG: e[10:].contains_message(),
    "[::2] contains output": lambda e, A, NG: e[::2].contains_function_call_output(),
    "skip_next(2)": lambda e, A, NG: e.skip_next(2),
    "skip_next past the end": lambda e, A, NG: e.skip_next(9),
    "skip_next(0)": lambda e, A, NG: e.skip_next(0),
    "skip_next(-1)": lambda e, A, NG: e.skip_next(-1),
    "skip_next('2')": lambda e, A, NG: e.skip_next("2"),
    "skip_next_event_if match": lambda e, A, NG: e.skip_next_event_if(type="message",
                                                                       role="assistant"),
    "skip_next_event_if other role": lambda e, A, NG: e.skip_next_event_if(type="message",
                                                                            role="user"),
    "skip_next_event_if other type": lambda e, A, NG: e.skip_next_event_if(
        type="function_call"),
    "skip_next_event_if call with arguments": lambda e, A, NG: (
        e.skip_next(1), e.skip_next_event_if(type="function_call", name="lookup",
                                             arguments={"n": 1}))[1],
    "skip_next_event_if at the end": lambda e, A, NG: (
        e.skip_next(5), e.skip_next_event_if(type="message"))[1],
    "skip_next_event_if without type": lambda e, A, NG: e.skip_next_event_if(),
    "no_more_events with events left": lambda e, A, NG: e.no_more_events(),
    "no_more_events at the end": lambda e, A, NG: (e.skip_next(5), e.no_more_events())[1],
    "contains_function_call": lambda e, A, NG: e.contains_function_call(
        name="lookup", arguments={"city": "Paris"}),
    "contains_function_call none": lambda e, A, NG: e.contains_function_call(name="nope"),
    "contains_function_call_output is_error": lambda e, A, NG: (
        e.contains_function_call_output(is_error=True)),
    "contains_agent_handoff": lambda e, A, NG: e.contains_agent_handoff(new_agent_type=A),
    "contains_agent_handoff NOT_GIVEN": lambda e, A, NG: e.contains_agent_handoff(
        new_agent_type=NG),
    "contains_message user": lambda e, A, NG: e.contains_message(role="user"),
    "contains does not move the cursor": lambda e, A, NG: (
        e.contains_message(), e.next_event().is_message())[1],
    "event().item": lambda e, A, NG: e.next_event().event().item.text_content,
}

# Where agents_trio answers differently on purpose (docs/livekit-names.md says so): more
# lenient, where LiveKit's outcome is an accident of its implementation, or stricter.
DELIBERATE: dict[str, tuple[Op, str]] = {
    # LiveKit tests "is given" against NOT_GIVEN, so an explicit None is a criterion that
    # never matches; here None means "any", as the signatures' defaults say.
    "is_message(role=None)": (lambda e, A, NG: e[0].is_message(role=None), "lenient"),
    "is_function_call(name=None)": (lambda e, A, NG: e[1].is_function_call(name=None),
                                    "lenient"),
    # LiveKit's typed asserts are not EventAssert subclasses (no is_* on them)
    "is_message().is_message()": (lambda e, A, NG: e[0].is_message().is_message(), "lenient"),
    # LiveKit's type= is keyword-only
    "next_event('message')": (lambda e, A, NG: e.next_event("message"), "lenient"),
    # LiveKit consumes the next event silently and returns None
    "skip_next_event_if unknown type": (lambda e, A, NG: e.skip_next_event_if(type="bogus"),
                                        "strict"),
}


@pytest.mark.parametrize("name", list(PROBES))
def test_expect_answers_as_livekit(name: str) -> None:
    theirs, mine = both(PROBES[name])
    assert mine == theirs


@pytest.mark.parametrize("name", list(DELIBERATE))
def test_deliberate_differences_stay_as_documented(name: str) -> None:
    op, kind = DELIBERATE[name]
    theirs, mine = both(op)
    assert theirs != mine
    if kind == "lenient":
        assert theirs[0] == "raises" and mine[0] == "returns"
    else:
        assert mine == ("raises", "ValueError", 0)


# -- failure messages: what was expected and what came, and where --------------------------

def _failure(op: Op) -> str:
    expect = RunAssert(_our_events(RUN))
    with pytest.raises(AssertionError) as info:
        op(expect, Kelly, NOT_GIVEN)
    return str(info.value)


@pytest.mark.parametrize(("op", "says"), [
    (lambda e, A, NG: e.next_event().is_message(role="user"),
     ["Expected role 'user', got 'assistant'", '>>> [0] message role=assistant']),
    (lambda e, A, NG: e[1].is_function_call(name="other"),
     ["Expected function call name 'other', got 'lookup'", ">>> [1] function_call"]),
    (lambda e, A, NG: e[1].is_function_call(arguments={"n": 2}),
     ["For argument 'n', expected 2, got 1"]),
    (lambda e, A, NG: e[1].is_function_call(arguments={"zip": "x"}),
     ["Expected argument 'zip'='x', but it is missing"]),
    (lambda e, A, NG: e[2].is_function_call_output(output="rain"),
     ["Expected output 'rain', got 'sunny'", ">>> [2] function_call_output"]),
    (lambda e, A, NG: e[3].is_agent_handoff(new_agent_type=int),
     ["Expected new_agent of type int, got Kelly", ">>> [3] agent_handoff"]),
    (lambda e, A, NG: e[0].is_function_call(),
     ["Expected function_call event at [0], got message"]),
    (lambda e, A, NG: e[7], ["Index 7 out of range (total events: 5)"]),
    (lambda e, A, NG: e.skip_next(9),
     ["Tried to skip 9 event(s), but only 5 were available.", ">>> (end of events)"]),
    (lambda e, A, NG: (e.skip_next(5), e.next_event())[1],
     ["Expected another event, but none left."]),
    (lambda e, A, NG: (e.skip_next(4), e.no_more_events())[1],
     ["Expected no more events, but found: ChatMessageEvent", '>>> [4] message']),
    (lambda e, A, NG: e.contains_function_call(name="nope"),
     ["No function_call with name='nope' found in range [:]"]),
    (lambda e, A, NG: e.contains_agent_handoff(new_agent_type=NG),
     None),  # passes: NOT_GIVEN is no criterion
])
def test_failure_messages_name_what_was_expected_and_what_came(op: Op,
                                                               says: list[str] | None) -> None:
    if says is None:
        op(RunAssert(_our_events(RUN)), Kelly, NOT_GIVEN)
        return
    message = _failure(op)
    for part in says:
        assert part in message
    assert "[4] message role=assistant content=\"It is sunny\"" in message   # the listing
