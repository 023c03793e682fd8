"""The adversarial model, aimed at the close: every agent and AgentTask says goodbye in its
``on_exit`` (``session.say``, a generated reply that may call a tool, or both), and the close
comes at a random moment (while a reply plays, a tool runs, a handoff or an AgentTask is under
way, an ``on_enter`` runs, a goodbye plays) from the test driver, or from a tool of the agent
(``shutdown(drain=False)`` or ``await session.aclose()``), with random close graces.

Beyond ``DEFAULT_INVARIANTS``: each goodbye plays (its message committed once) or is cut
(committed as interrupted, or not at all), never twice, and ``on_exit`` can always say it;
the close, from whoever asked first, ends within ``close_grace`` x (stack depth + 1) plus the
shielded tool time and a small bound (the unwinding of the AgentTasks, the current agent's
goodbye, then the cancellation). ``AGENTS_TRIO_FUZZ=1`` draws fresh examples.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import msgspec
import trio
import trio.testing
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from adversary_agents import CLOSE_TOOLS, TOOLS, Desk, Farewells, GoodbyeMode
from agents_trio import Agent
from agents_trio.chat import ChatMessage
from agents_trio.testing import (DEFAULT_INVARIANTS, ConversationRecord, Reply, Schedule,
                                 run_conversation)
from agents_trio.testing.invariants import ConversationViolation, close_bound, violations
from agents_trio.testing.scripted_models import request_number
from agents_trio.testing.strategies import conversations, replies
from test_adversarial import PROPERTY

TASK_TOOLS = ("ask_details", "deeper", "finish", "agree", "escalate")
#: what a goodbye reply may call: tools that answer (a lookup, a note)
GOODBYE_TOOLS = {name: TOOLS[name] for name in ("lookup", "note")}
MODES: tuple[GoodbyeMode, ...] = ("say", "reply", "both")


@st.composite
def goodbye_schedules(draw: st.DrawFn, tools: dict[str, object], *, min_calls: int = 0
                      ) -> Schedule:
    """A conversation over ``tools`` with a goodbye reply and a close grace drawn too."""
    schedule = draw(conversations(tools=tools, runs=True, audio_output=None,
                                  min_calls=min_calls, max_close_delay=6.0))
    goodbye = draw(st.none() | replies(GOODBYE_TOOLS, depth=1, max_shield=0.5,
                                       max_latency=2.0))
    grace = draw(st.sampled_from([0.5, 1.0, 2.0, 5.0]))
    return msgspec.structs.replace(schedule, goodbye=goodbye, close_grace=grace)


def run_with_goodbyes(schedule: Schedule, mode: GoodbyeMode, *, consent: bool = False,
                      extra: Iterable[object] = (),
                      agent: Callable[[Farewells, list[str]], Agent] | None = None
                      ) -> ConversationRecord:
    """Play ``schedule`` against a polite desk (or ``agent(farewells, journal)``) and check
    every invariant (the default ones and the goodbye ones). The close starts at the first
    request: the driver's or a tool's."""
    farewells = Farewells(mode=mode)
    journal: list[str] = []

    def polite_desk(farewells: Farewells, journal: list[str]) -> Agent:
        return Desk(consent=consent, journal=journal, farewells=farewells)

    make = agent or polite_desk
    record = trio.run(functools.partial(
        run_conversation, lambda: make(farewells, journal), schedule),
        clock=trio.testing.MockClock(autojump_threshold=0))
    if farewells.close_requests and record.close_requested_at is not None:
        record.close_requested_at = min(record.close_requested_at, *farewells.close_requests)
    found = violations(record, [*DEFAULT_INVARIANTS, goodbyes_play_once(farewells),
                                close_bounded_from_first_request, *extra])  # type: ignore[list-item]
    if found:
        said = "\n".join(f"  {f.agent_id} {f.kind} at {record.t(f.at):.2f}: {f.handle!r} "
                         f"interrupted={f.handle.interrupted if f.handle else None} "
                         f"error={f.error!r}" for f in farewells.said)
        raise ConversationViolation([*found, f"goodbyes (mode {mode}):\n{said}"], record)
    return record


def _assistant(record: ConversationRecord) -> list[ChatMessage]:
    return [i for i in record.history if isinstance(i, ChatMessage) and i.role == "assistant"]


def goodbyes_play_once(farewells: Farewells):
    def goodbyes_play_or_are_cut_once(record: ConversationRecord) -> Iterable[str]:
        """Each goodbye of an ``on_exit`` can be said; it plays (one message), or it is cut
        (an interrupted message, or none), never committed twice; a reply's request shows
        in one message at most."""
        messages = _assistant(record)
        ids = [m.id for m in messages]
        for farewell in farewells.said:
            where = f"{farewell.agent_id}'s {farewell.kind} goodbye at {record.t(farewell.at):.2f}"
            if farewell.error is not None:
                yield f"{where} could not be said: {farewell.error!r}"
                continue
            handle = farewell.handle
            assert handle is not None
            if not handle.done():
                continue  # nothing_left_running says it
            own = [m for m in messages if m.id in {i.id for i in handle.chat_items}]
            for m in own:
                if ids.count(m.id) > 1:
                    yield f"{where}: message {m.id} committed {ids.count(m.id)} times"
            if farewell.kind == "say":
                assert farewell.words is not None
                tag = farewell.words.split(" goodbye")[0]
                same = [m for m in messages if (m.text_content or "").startswith(tag)]
                if len(same) > 1:
                    yield f"{where}: committed {len(same)} times: {[m.text_content for m in same]}"
                if handle.interrupted:
                    if any(not m.interrupted for m in own):
                        yield f"{where} was cut but its message is not marked interrupted"
                elif handle.exception() is None and not own:
                    yield f"{where} played (not interrupted, no error) but left no message"
        for req in record.llm_requests:
            if req.trigger != "instructions" or req.reply is not record.schedule.goodbye:
                continue
            shown = [m.text_content for m in messages
                     if request_number(m.text_content) == req.number]
            if len(shown) > 1:
                yield f"the goodbye reply r{req.number} shows in {len(shown)} messages: {shown}"

    return goodbyes_play_or_are_cut_once


def close_bounded_from_first_request(record: ConversationRecord) -> Iterable[str]:
    """From the first close request (driver or tool) to the ``close`` event: at most
    ``close_grace`` per agent on the stack plus one, plus the shielded time of the tools
    running then, plus 0.5 s."""
    start = record.close_requested_at
    closes = [at for _, at in record.events_named("close")]
    if start is None or not closes:
        return
    bound, parts = close_bound(record, start)
    bound += 0.5
    if closes[0] - start > bound + 1e-6:
        yield (f"the close asked for at {record.t(start):.2f} ended at {record.t(closes[0]):.2f}"
               f", more than {bound:.2f} s ({parts} + 0.5)")


VOICE_TOOLS = {name: args for name, args in TOOLS.items() if name not in TASK_TOOLS}
CLOSING_TOOLS = {**{name: TOOLS[name] for name in ("lookup", "transfer", "back",
                                                    "ask_details", "finish", "escalate")},
                 **CLOSE_TOOLS}
TASK_TOOLS_MAP = {name: TOOLS[name] for name in (*TASK_TOOLS, "transfer", "back", "lookup")}


#: whether sales awaits Consent() in its on_enter
CONSENT = st.booleans()


@settings(PROPERTY, max_examples=120)
@given(goodbye_schedules(VOICE_TOOLS), st.sampled_from(MODES), st.random_module())
def test_goodbyes_in_voice_conversations(schedule: Schedule, mode: GoodbyeMode,
                                         _: object) -> None:
    run_with_goodbyes(schedule, mode)


@settings(PROPERTY, max_examples=120)
@given(goodbye_schedules(TASK_TOOLS_MAP, min_calls=1), st.sampled_from(MODES), CONSENT,
       st.random_module())
def test_goodbyes_of_handoffs_and_nested_tasks(schedule: Schedule, mode: GoodbyeMode,
                                               consent: bool, _: object) -> None:
    run_with_goodbyes(schedule, mode, consent=consent)


@settings(PROPERTY, max_examples=120)
@given(goodbye_schedules(CLOSING_TOOLS, min_calls=1), st.sampled_from(MODES), CONSENT,
       st.random_module())
def test_goodbyes_when_a_tool_closes_the_session(schedule: Schedule, mode: GoodbyeMode,
                                                 consent: bool, _: object) -> None:
    run_with_goodbyes(schedule, mode, consent=consent)


# -- deterministic cases and reproducers ------------------------------------------------------

_INSTANT = {"ttft": 0.0, "duration": 0.0, "tts_ttfb": 0.0, "audio": 0.2}


def test_a_goodbye_reply_that_calls_a_tool_plays_at_the_close() -> None:
    from agents_trio.testing import ToolCall

    record = run_with_goodbyes(Schedule(
        greeting=Reply(**_INSTANT), close_at=2.0, audio_output=True,
        goodbye=Reply(text="bye now.", calls=(ToolCall(name="note",
                                                       arguments='{"text": "bye"}'),),
                      **_INSTANT)), "both")
    texts = [m.text_content for m in _assistant(record)]
    assert any("goodbye from desk" in (t or "") for t in texts), texts
    assert any("bye now." in (t or "") for t in texts), texts
    assert [ex.name for ex in record.tool_executions] == ["note"]


def test_a_task_goodbye_that_uses_its_whole_grace_leaves_the_parent_its_goodbye() -> None:
    """Fuzz find: the close comes while the details task listens; its goodbye (a say longer
    than the 0.5 s grace) is cut at the grace. The unwinding bounded the goodbye *and* the
    task's return by one grace, so the task, cancelled only when the grace had run out, was
    still on the stack: the unwinding stopped, the close skipped the desk's goodbye, and the
    desk's ``on_exit`` ran in the cancellation, after ``close``, where ``say`` raised."""
    from agents_trio.testing import ToolCall, UserSpeech

    agree = ToolCall(name="agree")
    run_with_goodbyes(Schedule(
        actions=(UserSpeech(at=0.5, duration=0.1, transcript="hello there (0)", stt_delay=0.0,
                            reply=Reply(calls=(agree,), **_INSTANT)),),
        greeting=Reply(calls=(agree, ToolCall(name="ask_details")), **_INSTANT),
        close_at=0.6, audio_output=True, preemptive=False, close_grace=0.5), "say")


def test_the_close_bound_counts_the_wait_for_the_last_words_and_still_catches_an_overrun(
) -> None:
    """The close waits up to ``session_close_transcript_timeout`` for the user's last words
    after the goodbyes (LiveKit's ``_teardown_activity`` does so after ``drain``), so the
    bound of ``close_within_grace`` counts it (with a 0.5 s grace it flagged a user still
    speaking at the close); a close longer than that is still caught."""
    from types import SimpleNamespace

    from agents_trio.testing.invariants import close_within_grace

    def closing(took: float) -> list[str]:
        record = ConversationRecord(schedule=Schedule(close_at=1.0, close_grace=0.5))
        record.session = SimpleNamespace(session_close_transcript_timeout=2.0)  # type: ignore[assignment]
        record.close_requested_at, record.exited_at = 1.0, 1.0 + took
        return list(close_within_grace(record))

    assert closing(0.5 * 2 + 2.0) == []
    assert closing(0.5 * 2 + 2.0 + 0.05)  # one agent: grace x 2 + the transcript wait


@settings(PROPERTY, max_examples=20)
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_close_during_a_handoff_goodbye_leaves_it_interrupted_not_played(_: object) -> None:
    """Fuzz find: a tool hands off to sales and the desk's ``on_exit`` says goodbye (the
    handoff drains the desk); the close comes 50 ms later. The desk was draining, so the
    close did not interrupt it; the goodbye was cancelled with the work and its handle ended
    done, not interrupted, with no message: a speech that never played claimed to have
    played out. A speech the close cancels now ends interrupted."""
    from agents_trio.testing import TextInput, ToolCall

    run_with_goodbyes(Schedule(
        actions=(TextInput(at=0.5, text="hello there (0)", reply=Reply(
            calls=(ToolCall(name="transfer"),), **_INSTANT)),),
        greeting=Reply(**_INSTANT), close_at=0.55, audio_output=False, preemptive=False,
        close_grace=0.5), "say")


@settings(PROPERTY, max_examples=20, phases=[Phase.generate])
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_close_while_consent_runs_leaves_sales_its_goodbye(_: object) -> None:
    """Fuzz find: sales.on_enter awaits ``Consent()`` while its greeting's tool reply (r4)
    hangs in the LLM. The close unwinds Consent (its goodbye plays), then finishes sales:
    ``interrupt(force=True)`` skipped the tool-reply step still generating, so waiting for
    sales's speeches to stop took the whole grace, and sales's ``on_exit`` ran in the
    cancellation, after ``close``, where ``say`` raised. A forced interruption now takes
    every background speech, as LiveKit's does."""
    from agents_trio.testing import Fault, TextInput, ToolCall

    agree = ToolCall(name="agree")
    run_with_goodbyes(Schedule(
        actions=(TextInput(at=0.5, text="hello there (0)", reply=Reply(calls=(agree,),
                                                                       **_INSTANT)),
                 TextInput(at=0.6, text="hello there (1)", reply=Reply(calls=(agree,),
                                                                       **_INSTANT))),
        greeting=Reply(calls=(ToolCall(name="transfer", reply=Reply(
            calls=(agree,), llm_fault=Fault(kind="hang", at=0), **_INSTANT)), agree),
            **{**_INSTANT, "duration": 0.05}),
        close_at=0.6, audio_output=False, preemptive=False, close_grace=0.5), "say",
        consent=True)


@settings(PROPERTY, max_examples=20, phases=[Phase.generate])
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_second_transfer_queued_while_sales_starts_consent_replaces_consent(_: object) -> None:
    """Fuzz find: the desk's goodbye reply calls ``transfer`` again, so a second handoff to
    sales waits behind the first. It was taken up while the first sales's ``on_enter``
    started Consent: it drained that sales under Consent, whose end then cancelled Consent
    from outside (consent's goodbye was asked of a closed activity) and the history showed
    ``sales -> sales``. The handoff now leaves Consent (which holds the floor) and the
    close, coming meanwhile, gives the floor back to sales for its goodbye."""
    from agents_trio.testing import ToolCall, UserSpeech

    run_with_goodbyes(Schedule(
        actions=(UserSpeech(at=9.2, duration=0.1, transcript="hello there (0)", stt_delay=0.0,
                            reply=Reply(text="okay.", calls=(ToolCall(name="ask_details"),),
                                        **_INSTANT)),),
        close_at=9.3, greeting=Reply(text="okay.", calls=(ToolCall(name="transfer"),),
                                     audio=2.1, tts_ttfb=0.1, ttft=0.0, duration=0.0),
        audio_output=True, can_pause_audio=False, preemptive=False, close_grace=0.5),
        "reply", consent=True)


@settings(PROPERTY, max_examples=10, phases=[Phase.generate])
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_task_the_close_unwinds_while_it_starts_never_enters(_: object) -> None:
    """Fuzz find: the greeting calls ``ask_details`` and ``hang_up`` at once. The close
    reached the details task while its activity was still starting: the unwinding skipped
    its goodbye (nothing ran yet), then the task entered anyway and its ``on_exit`` ran in
    the cancellation, where ``say()`` raised. A task cancelled while it starts now never
    enters, as LiveKit starts no activity in a closing session."""
    from agents_trio.testing import ToolCall, UserSpeech

    run_with_goodbyes(Schedule(
        actions=(UserSpeech(at=0.5, duration=0.1, transcript="hello there (0)", stt_delay=0.0,
                            reply=Reply(text="okay.", calls=(ToolCall(name="ask_details"),),
                                        **_INSTANT)),),
        close_at=0.6, greeting=Reply(text="okay.", calls=(ToolCall(name="ask_details"),
                                                          ToolCall(name="hang_up")),
                                     **_INSTANT),
        audio_output=False, preemptive=False, close_grace=0.5), "say")
