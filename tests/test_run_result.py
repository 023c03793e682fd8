"""Tests for agents_trio.run_result: event recording, completion and the expect helpers."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
import trio

from agents_trio.chat import (
    AgentConfigUpdate,
    AgentHandoff,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
)
from agents_trio.run_result import (
    AgentHandoffEvent,
    ChatMessageEvent,
    FunctionCallEvent,
    FunctionCallOutputEvent,
    RunResult,
)
from agents_trio.testing import (
    AgentHandoffAssert,
    ChatMessageAssert,
    EventAssert,
    EventRangeAssert,
    FunctionCallAssert,
    FunctionCallOutputAssert,
    RunAssert,
)

# ---------------------------------------------------------------------------------------------
# helpers


class AgentA:
    pass


class AgentB:
    pass


class AgentBSub(AgentB):
    pass


def msg(text: str, t: float, role: str = "assistant") -> ChatMessage:
    return ChatMessage(role=role, content=[text], created_at=t)  # type: ignore[arg-type]


def call(name: str, args: dict[str, Any], t: float, call_id: str = "c1") -> FunctionCall:
    return FunctionCall(call_id=call_id, name=name, arguments=json.dumps(args), created_at=t)


def out(output: str, t: float, *, is_error: bool = False, name: str = "get_weather",
        call_id: str = "c1") -> FunctionCallOutput:
    return FunctionCallOutput(call_id=call_id, name=name, output=output, is_error=is_error,
                              created_at=t)


def handoff(t: float) -> AgentHandoff:
    return AgentHandoff(old_agent_id="a", new_agent_id="b", created_at=t)


def weather_run() -> RunResult[Any]:
    """handoff A->B, assistant message, function call, its output, final assistant message."""
    r: RunResult[Any] = RunResult(user_input="weather in Tokyo?")
    r.record_item(handoff(1.0), old_agent=AgentA(), new_agent=AgentBSub())
    r.record_item(msg("Let me check.", 2.0))
    r.record_item(call("get_weather", {"location": "Tokyo", "unit": "C"}, 3.0))
    r.record_item(out("sunny", 4.0))
    r.record_item(msg("It is sunny in Tokyo.", 5.0))
    return r


class FakeHandle:
    """Duck-typed watchable: done(), add_done_callback(cb), exception()."""

    def __init__(self) -> None:
        self._done = False
        self._exc: BaseException | None = None
        self._callbacks: list[Callable[[FakeHandle], Any]] = []
        self.callbacks_added = 0

    def done(self) -> bool:
        return self._done

    def exception(self) -> BaseException | None:
        return self._exc

    def add_done_callback(self, cb: Callable[[FakeHandle], Any]) -> None:
        self.callbacks_added += 1
        if self._done:
            cb(self)
        else:
            self._callbacks.append(cb)

    def finish(self, exc: BaseException | None = None) -> None:
        self._done = True
        self._exc = exc
        cbs, self._callbacks = self._callbacks, []
        for cb in cbs:
            cb(self)


async def settle(r: RunResult[Any]) -> RunResult[Any]:
    """``await r`` with a deadline, so a run that never finishes fails instead of hanging."""
    with trio.fail_after(100):
        return await r


async def finish_later(handle: FakeHandle, delay: float,
                       exc: BaseException | None = None) -> None:
    await trio.sleep(delay)
    handle.finish(exc)


# ---------------------------------------------------------------------------------------------
# recording


def test_events_types_and_fields() -> None:
    r = weather_run()
    assert [e.type for e in r.events] == [
        "agent_handoff", "message", "function_call", "function_call_output", "message"]
    assert [type(e) for e in r.events] == [
        AgentHandoffEvent, ChatMessageEvent, FunctionCallEvent, FunctionCallOutputEvent,
        ChatMessageEvent]
    ho = r.events[0]
    assert isinstance(ho, AgentHandoffEvent)
    assert isinstance(ho.old_agent, AgentA) and isinstance(ho.new_agent, AgentBSub)
    assert ho.item.new_agent_id == "b"
    assert r.events[3].item.output == "sunny"


def test_events_sorted_by_created_at_with_stable_ties() -> None:
    r: RunResult[Any] = RunResult()
    m3 = msg("third", 3.0)
    m1 = msg("first", 1.0)
    o2 = out("out", 2.0)
    tie_a = msg("tie-a", 2.0)
    tie_b = call("tie_b", {}, 2.0)
    early = msg("zero", 0.0)
    for item in (m3, m1, o2, tie_a, tie_b, early):
        r.record_item(item)
    assert [e.item for e in r.events] == [early, m1, o2, tie_a, tie_b, m3]


def test_record_item_return_value_and_filtering() -> None:
    r: RunResult[Any] = RunResult(user_input="hi")
    assert r.record_item(msg("hi", 1.0, role="user")) is None
    assert r.record_item(msg("sys", 1.5, role="system")) is None
    assert r.record_item(AgentConfigUpdate(instructions="x", created_at=1.6)) is None
    assert r.events == []
    ev = r.record_item(msg("hello", 2.0))
    assert isinstance(ev, ChatMessageEvent) and ev.item.text_content == "hello"
    assert r.events == [ev]
    assert r.user_input == "hi"


def test_handoff_without_old_agent() -> None:
    r: RunResult[Any] = RunResult()
    ev = r.record_item(handoff(1.0), new_agent=AgentA())
    assert isinstance(ev, AgentHandoffEvent)
    assert ev.old_agent is None and isinstance(ev.new_agent, AgentA)


# ---------------------------------------------------------------------------------------------
# expect: cursor


def test_expect_is_cached_and_cursor_carries_over() -> None:
    r = weather_run()
    assert r.expect is r.expect
    r.expect.next_event().is_agent_handoff(new_agent_type=AgentB)
    r.expect.next_event().is_message(role="assistant")
    r.expect.next_event().is_function_call(name="get_weather", arguments={"location": "Tokyo"})
    r.expect.next_event().is_function_call_output(output="sunny", is_error=False)
    r.expect.next_event().is_message(role="assistant")
    r.expect.no_more_events()


def test_next_event_returns_event_assert_with_event() -> None:
    r = weather_run()
    ev = r.expect.next_event()
    assert type(ev) is EventAssert
    assert ev.event() is r.events[0]


def test_next_event_none_left_fails_with_listing() -> None:
    r = weather_run()
    r.expect.skip_next(5)
    with pytest.raises(AssertionError) as ei:
        r.expect.next_event()
    text = str(ei.value)
    assert "none left" in text
    assert "[0] agent_handoff old_agent=AgentA new_agent=AgentBSub" in text
    assert ">>> (end of events)" in text


def test_next_event_on_empty_run_fails() -> None:
    r: RunResult[Any] = RunResult()
    with pytest.raises(AssertionError) as ei:
        r.expect.next_event()
    assert "(no events)" in str(ei.value)


def test_next_event_with_type_skips_and_returns_typed_assert() -> None:
    r = weather_run()
    fc = r.expect.next_event(type="function_call")
    assert isinstance(fc, FunctionCallAssert)
    assert fc.event() is r.events[2]
    fco = r.expect.next_event(type="function_call_output")
    assert isinstance(fco, FunctionCallOutputAssert)
    assert fco.event().item.output == "sunny"
    m = r.expect.next_event(type="message")
    assert isinstance(m, ChatMessageAssert)
    assert m.event().item.text_content == "It is sunny in Tokyo."
    # typed asserts are still EventAsserts
    m.is_message(role="assistant")
    r.expect.no_more_events()


def test_next_event_with_type_agent_handoff() -> None:
    r = weather_run()
    h = r.expect.next_event(type="agent_handoff")
    assert isinstance(h, AgentHandoffAssert)
    assert isinstance(h.event().new_agent, AgentBSub)


def test_next_event_with_type_fails_when_no_match_left() -> None:
    r = weather_run()
    r.expect.next_event(type="function_call")
    with pytest.raises(AssertionError) as ei:
        r.expect.next_event(type="function_call")
    assert "'function_call' event" in str(ei.value)
    assert "[4] message role=assistant" in str(ei.value)


def test_skip_next_returns_self_and_counts() -> None:
    r = weather_run()
    ex = r.expect
    assert ex.skip_next() is ex
    assert ex.skip_next(2) is ex
    ex.next_event().is_function_call_output()
    with pytest.raises(AssertionError) as ei:
        ex.skip_next(3)
    assert "Tried to skip 3 event(s), but only 1 were available." in str(ei.value)


def test_no_more_events_fails_with_arrow_at_cursor() -> None:
    r = weather_run()
    r.expect.skip_next(2)
    with pytest.raises(AssertionError) as ei:
        r.expect.no_more_events()
    text = str(ei.value)
    assert "Expected no more events, but found: FunctionCallEvent" in text
    lines = text.splitlines()
    arrow = [ln for ln in lines if ln.startswith(">>>")]
    assert arrow == [
        '>>> [2] function_call name=get_weather arguments={"location": "Tokyo", "unit": "C"}']
    assert '    [1] message role=assistant content="Let me check."' in lines


def test_skip_next_event_if_match_and_no_match() -> None:
    r = weather_run()
    ex = r.expect
    assert ex.skip_next_event_if(type="message") is None  # next is a handoff
    assert ex.skip_next_event_if(type="agent_handoff", new_agent_type=AgentA) is None
    h = ex.skip_next_event_if(type="agent_handoff", new_agent_type=AgentB)
    assert isinstance(h, AgentHandoffAssert) and h.event() is r.events[0]
    assert ex.skip_next_event_if(type="message", role="user") is None
    m = ex.skip_next_event_if(type="message", role="assistant")
    assert isinstance(m, ChatMessageAssert) and m.event() is r.events[1]
    assert ex.skip_next_event_if(type="function_call", name="other") is None
    assert ex.skip_next_event_if(type="function_call", arguments={"location": "Paris"}) is None
    fc = ex.skip_next_event_if(type="function_call", name="get_weather",
                               arguments={"unit": "C"})
    assert isinstance(fc, FunctionCallAssert)
    assert ex.skip_next_event_if(type="function_call_output", output="rainy") is None
    assert ex.skip_next_event_if(type="function_call_output", is_error=True) is None
    fco = ex.skip_next_event_if(type="function_call_output", output="sunny", is_error=False)
    assert isinstance(fco, FunctionCallOutputAssert)
    ex.skip_next()
    # nothing left: returns None, does not fail
    assert ex.skip_next_event_if(type="message") is None
    ex.no_more_events()


# ---------------------------------------------------------------------------------------------
# expect: indexing and ranges


def test_getitem_int_and_negative_does_not_move_cursor() -> None:
    r = weather_run()
    ex = r.expect
    assert ex[0].event() is r.events[0]
    assert ex[-1].event() is r.events[4]
    ex[-1].is_message(role="assistant")
    ex[2].is_function_call(name="get_weather")
    ex.next_event().is_agent_handoff()  # cursor still at 0


def test_getitem_out_of_range_and_bad_key() -> None:
    r = weather_run()
    with pytest.raises(AssertionError) as ei:
        r.expect[5]
    assert "out of range (total events: 5)" in str(ei.value)
    assert "[4] message" in str(ei.value)
    with pytest.raises(AssertionError):
        r.expect[-6]
    with pytest.raises(TypeError):
        r.expect["0"]  # type: ignore[call-overload]


def test_slice_range_contains_pass() -> None:
    r = weather_run()
    rng = r.expect[1:4]
    assert isinstance(rng, EventRangeAssert)
    m = rng.contains_message(role="assistant")
    assert m.event() is r.events[1]
    assert rng.contains_function_call(name="get_weather",
                                      arguments={"location": "Tokyo"}).event() is r.events[2]
    assert rng.contains_function_call_output(output="sunny").event() is r.events[3]
    assert r.expect[:1].contains_agent_handoff(new_agent_type=AgentB).event() is r.events[0]
    # last message via a range starting later
    assert r.expect[2:].contains_message().event() is r.events[4]


def test_slice_range_contains_fail() -> None:
    r = weather_run()
    with pytest.raises(AssertionError) as ei:
        r.expect[1:4].contains_agent_handoff()
    assert "No agent_handoff found in range [1:4]" in str(ei.value)
    assert "[0] agent_handoff" in str(ei.value)
    with pytest.raises(AssertionError) as ei:
        r.expect[2:4].contains_message()
    assert "No message found" in str(ei.value)
    with pytest.raises(AssertionError):
        r.expect[:2].contains_function_call()
    with pytest.raises(AssertionError):
        r.expect[:3].contains_function_call_output()
    with pytest.raises(AssertionError) as ei:
        r.expect[0:0].contains_message()
    assert "[2] function_call name=get_weather" in str(ei.value)


def test_slice_with_step_reports_right_index() -> None:
    r = weather_run()
    fc = r.expect[0::2].contains_function_call()
    assert fc.event() is r.events[2]
    with pytest.raises(AssertionError) as ei:
        fc.is_message()
    assert any(ln.startswith(">>> [2]") for ln in str(ei.value).splitlines())


def test_run_assert_contains_over_all_events() -> None:
    r = weather_run()
    ex = r.expect
    ex.skip_next(5)  # cursor does not restrict contains_*
    assert ex.contains_message(role="assistant").event() is r.events[1]
    assert ex.contains_function_call(name="get_weather").event() is r.events[2]
    assert ex.contains_function_call(arguments={"unit": "C"}).event() is r.events[2]
    assert ex.contains_function_call_output(is_error=False).event() is r.events[3]
    assert ex.contains_agent_handoff(new_agent_type=AgentBSub).event() is r.events[0]
    for fn in (
        lambda: ex.contains_message(role="user"),
        lambda: ex.contains_function_call(name="book_flight"),
        lambda: ex.contains_function_call(arguments={"location": "Paris"}),
        lambda: ex.contains_function_call_output(output="rainy"),
        lambda: ex.contains_function_call_output(is_error=True),
        lambda: ex.contains_agent_handoff(new_agent_type=AgentA),
    ):
        with pytest.raises(AssertionError) as ei:
            fn()
        assert "found in range" in str(ei.value)
        assert "[3] function_call_output name=get_weather output=\"sunny\" is_error=False" \
            in str(ei.value)


# ---------------------------------------------------------------------------------------------
# expect: event asserts


def test_is_message_pass_and_fail() -> None:
    r = weather_run()
    m = r.expect[1].is_message()
    assert isinstance(m, ChatMessageAssert)
    assert m.event().item.text_content == "Let me check."
    r.expect[1].is_message(role="assistant")
    with pytest.raises(AssertionError) as ei:
        r.expect[1].is_message(role="user")
    assert "Expected role 'user', got 'assistant'" in str(ei.value)
    assert '>>> [1] message role=assistant content="Let me check."' in str(ei.value)
    with pytest.raises(AssertionError) as ei:
        r.expect[2].is_message()
    assert "Expected message event at [2], got function_call" in str(ei.value)


def test_is_function_call_pass_and_fail() -> None:
    r = weather_run()
    fc = r.expect[2].is_function_call(name="get_weather",
                                      arguments={"location": "Tokyo", "unit": "C"})
    assert fc.event().item.name == "get_weather"
    r.expect[2].is_function_call(arguments={})
    with pytest.raises(AssertionError) as ei:
        r.expect[2].is_function_call(name="get_time")
    assert "Expected function call name 'get_time', got 'get_weather'" in str(ei.value)
    with pytest.raises(AssertionError) as ei:
        r.expect[2].is_function_call(arguments={"location": "Paris"})
    assert "expected 'Paris', got 'Tokyo'" in str(ei.value)
    with pytest.raises(AssertionError) as ei:
        r.expect[2].is_function_call(arguments={"days": 3})
    assert "'days'" in str(ei.value) and "missing" in str(ei.value)
    with pytest.raises(AssertionError) as ei:
        r.expect[3].is_function_call()
    assert '>>> [3] function_call_output' in str(ei.value)


def test_is_function_call_invalid_json_arguments() -> None:
    r: RunResult[Any] = RunResult()
    r.record_item(FunctionCall(call_id="x", name="f", arguments="{not json", created_at=1.0))
    r.expect[0].is_function_call(name="f")  # no arguments check: fine
    with pytest.raises(AssertionError) as ei:
        r.expect[0].is_function_call(arguments={"a": 1})
    assert "not valid JSON" in str(ei.value)


def test_is_function_call_output_pass_and_fail() -> None:
    r: RunResult[Any] = RunResult()
    r.record_item(out("boom", 1.0, is_error=True))
    fco = r.expect[0].is_function_call_output(output="boom", is_error=True)
    assert fco.event().item.is_error is True
    with pytest.raises(AssertionError) as ei:
        r.expect[0].is_function_call_output(is_error=False)
    assert "Expected is_error=False, got True" in str(ei.value)
    with pytest.raises(AssertionError) as ei:
        r.expect[0].is_function_call_output(output="boo")
    assert "Expected output 'boo', got 'boom'" in str(ei.value)


def test_is_agent_handoff_pass_and_fail() -> None:
    r = weather_run()
    h = r.expect[0].is_agent_handoff(new_agent_type=AgentBSub)
    assert isinstance(h.event().old_agent, AgentA)
    with pytest.raises(AssertionError) as ei:
        r.expect[0].is_agent_handoff(new_agent_type=AgentA)
    assert "Expected new_agent of type AgentA, got AgentBSub" in str(ei.value)
    with pytest.raises(AssertionError) as ei:
        r.expect[4].is_agent_handoff()
    assert "Expected agent_handoff event at [4], got message" in str(ei.value)


def test_run_assert_over_plain_list() -> None:
    ev = ChatMessageEvent(msg("x", 1.0))
    ra = RunAssert([ev])
    assert ra.next_event(type="message").event() is ev
    ra.no_more_events()


# ---------------------------------------------------------------------------------------------
# completion


async def test_not_done_at_construction_and_check_done(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    assert not r.done()
    await trio.sleep(0)
    assert not r.done()
    assert r.check_done() is True
    assert r.done()
    assert await settle(r) is r


async def test_await_waits_for_all_watched_handles(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    h1, h2 = FakeHandle(), FakeHandle()
    r.watch(h1)
    r.watch(h2)
    r.watch(h1)  # duplicate watch is harmless
    assert h1.callbacks_added == 1
    async with trio.open_nursery() as nursery:
        nursery.start_soon(finish_later, h1, 1.0)
        nursery.start_soon(finish_later, h2, 3.0)
        start = trio.current_time()
        assert await settle(r) is r
        assert trio.current_time() - start == pytest.approx(3.0)
    assert r.done()


async def test_await_raises_handle_exception(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    h1, h2 = FakeHandle(), FakeHandle()
    r.watch(h1)
    r.watch(h2)
    err = ValueError("llm failed")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(finish_later, h1, 1.0, err)
        nursery.start_soon(finish_later, h2, 2.0)
        with pytest.raises(ValueError) as ei:
            await settle(r)
        assert ei.value is err
        assert trio.current_time() == pytest.approx(2.0)
    # waiting again (via wait()) raises again
    with pytest.raises(ValueError), trio.fail_after(1):
        await r.wait()


async def test_last_failed_handle_wins(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    h1, h2, h3 = FakeHandle(), FakeHandle(), FakeHandle()
    for h in (h1, h2, h3):
        r.watch(h)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(finish_later, h1, 1.0, KeyError("first"))
        nursery.start_soon(finish_later, h2, 2.0, IndexError("second"))
        nursery.start_soon(finish_later, h3, 3.0)
        with pytest.raises(IndexError, match="second"):
            await settle(r)


async def test_watch_already_done_handle(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    h = FakeHandle()
    h.finish()
    r.watch(h)
    assert r.done()
    assert await settle(r) is r


async def test_watch_after_done_is_noop(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    r.check_done()
    h = FakeHandle()
    r.watch(h)
    assert h.callbacks_added == 0
    h.finish(RuntimeError("late"))
    assert await settle(r) is r


async def test_fail_marks_done_with_error(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    h = FakeHandle()
    r.watch(h)
    hold = r.hold()

    async def close_later() -> None:
        await trio.sleep(5)
        r.fail(RuntimeError("session closed"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(close_later)
        with pytest.raises(RuntimeError, match="session closed"):
            await settle(r)
        assert trio.current_time() == pytest.approx(5.0)
    assert r.done()
    # later events do not change the outcome
    h.finish(ValueError("late"))
    hold.release()
    r.fail(RuntimeError("other"))
    with pytest.raises(RuntimeError, match="session closed"):
        await settle(r)


async def test_hold_keeps_run_open(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    h = FakeHandle()
    r.watch(h)
    hold = r.hold()
    h.finish()
    assert not r.done()
    r.hold().release()  # another hold, released at once
    assert not r.done()

    async def release_later() -> None:
        await trio.sleep(2)
        hold.release()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(release_later)
        await settle(r)
        assert trio.current_time() == pytest.approx(2.0)
    assert r.done()


async def test_hold_alone_then_release(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    hold = r.hold()
    assert not r.check_done()
    hold.release()
    assert r.done()


async def test_unwatch_lets_run_finish(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    parent, child = FakeHandle(), FakeHandle()
    r.watch(parent)
    r.watch(child)
    r.unwatch(FakeHandle())  # unknown handle ignored

    async def agent_task_waits() -> None:
        await trio.sleep(1)
        child.finish()
        await trio.sleep(1)
        r.unwatch(parent)  # the AgentTask waits for user input: run may finish

    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent_task_waits)
        await settle(r)
        assert trio.current_time() == pytest.approx(2.0)
    assert not parent.done()
    # the unwatched handle failing later does not matter
    parent.finish(ValueError("ignored"))
    assert await settle(r) is r


async def test_unwatched_then_rewatched_handle_counts_once(
        autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    h, keep = FakeHandle(), FakeHandle()
    r.watch(keep)
    r.watch(h)
    r.unwatch(h)
    r.watch(h)
    assert h.callbacks_added == 2
    h.finish(ValueError("boom"))
    assert not r.done()
    keep.finish()
    assert r.done()
    with pytest.raises(ValueError, match="boom"):
        await settle(r)


async def test_unwatched_handle_finishing_is_ignored(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    h, keep = FakeHandle(), FakeHandle()
    r.watch(keep)
    r.watch(h)
    r.unwatch(h)
    h.finish(ValueError("ignored"))
    assert not r.done()
    keep.finish()
    assert await settle(r) is r


async def test_final_output(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[int] = RunResult()
    h = FakeHandle()
    r.watch(h)
    with pytest.raises(RuntimeError, match="not done"):
        r.final_output
    r.set_final_output(42)
    with pytest.raises(RuntimeError, match="not done"):
        r.final_output
    h.finish()
    assert r.final_output == 42

    r2: RunResult[Any] = RunResult()
    r2.check_done()
    with pytest.raises(RuntimeError, match="no final output"):
        r2.final_output

    r3: RunResult[Any] = RunResult()
    r3.set_final_output(None)  # None is a valid output once set
    r3.check_done()
    assert r3.final_output is None


async def test_items_recorded_while_running_visible_after_await(
        autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult(user_input="hi")
    h = FakeHandle()
    r.watch(h)

    async def speak() -> None:
        await trio.sleep(1)
        r.record_item(msg("hi", trio.current_time() - 1, role="user"))
        r.record_item(out("ok", trio.current_time() + 0.5))
        r.record_item(call("f", {}, trio.current_time()))
        h.finish()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(speak)
        await settle(r)
    r.expect.next_event().is_function_call(name="f")
    r.expect.next_event().is_function_call_output(output="ok")
    r.expect.no_more_events()


async def test_a_hold_is_released_once(autojump_clock: trio.abc.Clock) -> None:
    r: RunResult[Any] = RunResult()
    first, second = r.hold(), r.hold()
    first.release()
    first.release()  # the second release of the same hold does not end the other hold
    assert first.released and not second.released
    assert not r.check_done()
    with second:
        pass
    assert r.done()
    assert r.hold().released  # a hold taken on a finished run holds nothing
