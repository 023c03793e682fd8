"""Every request of the remote-session protocol, over real loopback sockets and in memory.

The TCP and Unix-socket tests run on the real clock (a MockClock would jump while the host
waits for the kernel) with zero-latency fakes, bounded by ``fail_after``; the rest run on
memory streams under the autojump clock.
"""

from __future__ import annotations

import functools
import os
import tempfile

import pytest
import trio
import trio.testing

from agents_trio import (RemoteConnectionError, RemoteSessionClosedError, RemoteSessionError,
                         SessionClosedError, SessionHost, connect_remote_session,
                         open_remote_session, open_session_host, serve_session)
from agents_trio.remote import parse_address
from remote_helpers import Weather, client_of, hosted, text_session


async def test_every_request_over_loopback_tcp() -> None:
    with trio.fail_after(10):
        async with text_session(fast=True) as session, \
                open_session_host(session, port=0) as host:
            assert host.address == f"127.0.0.1:{host.port}"
            async with open_remote_session(host.address) as remote:
                await session.start(Weather())
                assert await remote.wait_for_ready() == "weather"
                await remote.subscribe(["conversation_item_added", "agent_state_changed"])
                added, states = [], []
                remote.on("conversation_item_added", lambda ev: added.append(ev.item))
                remote.on("agent_state_changed", lambda ev: states.append(ev.new_state))

                result = await remote.run("weather in Paris?")
                result.expect.next_event().is_message(role="assistant")
                result.expect.next_event().is_function_call(name="get_weather",
                                                            arguments={"location": "Paris"})
                result.expect.next_event().is_function_call_output(output="sunny in Paris")
                msg = result.expect.next_event().is_message(role="assistant").event().item
                assert msg.text_content == "It is sunny in Paris."
                result.expect.no_more_events()

                history = await remote.get_chat_history()
                assert [i.type for i in history.items] == [i.type for i in session.history.items]
                assert history.items[-1].id == session.history.items[-1].id

                info = await remote.get_agent_info()
                assert (info.id, info.label) == ("weather", "Weather")
                assert info.instructions == "You answer weather questions."
                assert [t.name for t in info.tools] == ["get_weather"]
                assert info.tools[0].parameters["required"] == ["location"]

                state = await remote.get_session_state()
                assert (state.agent_state, state.user_state, state.agent_id, state.ready) == (
                    "listening", "listening", "weather", True)
                assert state.current_speech is None

                # the reply to run() comes after the turn's events
                assert [m.text_content for m in added if m.type == "message"][-2:] == [
                    "Let me look.", "It is sunny in Paris."]
                assert states[-3:] == ["thinking", "speaking", "listening"]
                await remote.unsubscribe()
                await remote.run("hello")
                assert added[-1].text_content == "It is sunny in Paris."


async def test_loopback_unix_socket_and_session_owned_host() -> None:
    path = os.path.join(tempfile.mkdtemp(), "agent.sock")
    with trio.fail_after(10):
        async with text_session(fast=True) as session:
            host = await SessionHost(session, path=path).start()
            assert host.address == f"unix:{path}" and host.port is None
            await session.start(Weather())
            async with open_remote_session(host.address) as remote:
                result = await remote.run("hello")
                assert [e.item.text_content for e in result.events] == ["Hi there!"]
        # the session closed, so its host stopped and removed its socket
        assert not os.path.exists(path)
        assert host.statistics().connections == 0


async def test_serve_session_in_the_callers_nursery_and_a_borrowed_client_nursery() -> None:
    with trio.fail_after(10):
        async with text_session(fast=True) as session, trio.open_nursery() as nursery:
            host = await nursery.start(functools.partial(serve_session, session, port=0,
                                                         max_connections=4))
            await session.start(Weather())
            remote = await connect_remote_session(nursery, host.address)
            assert await remote.wait_for_ready() == "weather"
            await remote.aclose()
            assert remote.closed
            with pytest.raises(RemoteConnectionError, match="closed"):
                await remote.get_session_state()
            await host.aclose()
            with pytest.raises(RemoteConnectionError, match="could not connect"):
                await connect_remote_session(nursery, host.address)


def test_addresses_parse() -> None:
    assert parse_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_address("[::1]:80") == ("::1", 80)
    assert parse_address(":80") == ("127.0.0.1", 80)
    assert parse_address("unix:/tmp/a.sock") == "/tmp/a.sock"
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address("localhost")


async def test_a_silent_turn_is_a_success_with_no_items(autojump_clock) -> None:
    async with hosted() as host, client_of(host) as remote:
        result = await remote.run("nothing scripted for this")
        assert result.events == [] and result.done()
        result.expect.no_more_events()


async def test_a_model_failure_is_an_error_reply_and_the_session_goes_on(autojump_clock) -> None:
    async with hosted() as host, client_of(host) as remote:
        errors = []
        await remote.subscribe(["error"])
        remote.on("error", errors.append)
        with pytest.raises(RemoteSessionError, match="the model is down") as info:
            await remote.run("boom")
        assert (info.value.code, info.value.error_type) == ("run_failed", "APIError")
        result = await remote.run("hello")
        assert [e.item.text_content for e in result.events] == ["Hi there!"]
        assert [(e.error.message, e.error.error_type) for e in errors] == [
            ("the model is down", "APIError")]


async def test_wait_for_ready_waits_for_the_session_to_start(autojump_clock) -> None:
    async with hosted(start=False) as host, client_of(host) as remote:
        with pytest.raises(RemoteSessionError, match="not started") as info:
            await remote.run("hello")
        assert info.value.code == "not_ready"
        with pytest.raises(RemoteSessionError, match="not started"):
            await remote.get_agent_info()
        assert (await remote.get_session_state()).ready is False
        async with trio.open_nursery() as nursery:
            async def start_later() -> None:
                await trio.sleep(3)
                await host._session.start(Weather())

            nursery.start_soon(start_later)
            assert await remote.wait_for_ready() == "weather"
            assert trio.current_time() == pytest.approx(3.0, abs=0.01)


# a turn arriving interrupts the agent (a barge-in); with speech that does not allow
# interruptions, turns wait in the queue behind the one being played
UNINTERRUPTIBLE = {"turn_handling": {"interruption": {"enabled": False}}}


async def test_closing_the_session_answers_every_pending_request(autojump_clock) -> None:
    session = text_session(**UNINTERRUPTIBLE)
    async with hosted(session) as host:
        async with client_of(host) as a, client_of(host) as b:
            outcomes: dict[str, BaseException] = {}

            async def call(name: str, fn) -> None:
                try:
                    await fn()
                except Exception as e:
                    outcomes[name] = e

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "run", functools.partial(a.run, "slow"))
                await trio.sleep(0.5)
                nursery.start_soon(call, "queued", functools.partial(b.run, "hello"))
                await trio.sleep(0.5)
                assert host.statistics().queued_turns == 2
                await session.aclose()
            assert set(outcomes) == {"run", "queued"}
            for error in outcomes.values():
                assert isinstance(error, RemoteSessionClosedError)
                assert isinstance(error, SessionClosedError)
                assert error.code == "session_closed"
            with pytest.raises(RemoteSessionClosedError, match="the session closed"):
                await a.get_session_state()
        assert host.statistics().connections == 0


async def test_a_session_that_never_starts_does_not_hang_wait_for_ready(autojump_clock) -> None:
    session = text_session()
    async with hosted(session, start=False) as host, client_of(host) as remote:
        async with trio.open_nursery() as nursery:
            async def close_later() -> None:
                await trio.sleep(2)
                await session.aclose()

            nursery.start_soon(close_later)
            with pytest.raises(RemoteSessionClosedError):
                await remote.wait_for_ready()


async def test_closing_the_host_answers_pending_requests_with_host_closing(autojump_clock) -> None:
    async with hosted() as host, client_of(host) as remote:
        async with trio.open_nursery() as nursery:
            async def close_later() -> None:
                await trio.sleep(1)
                await host.aclose()

            nursery.start_soon(close_later)
            with pytest.raises(RemoteSessionClosedError, match="the host is closing") as info:
                await remote.run("slow")
            assert info.value.code == "host_closing"
        stats = host.statistics()
        assert (stats.connections, stats.pending_requests) == (0, 0)


async def test_runs_of_several_clients_are_played_one_at_a_time(autojump_clock) -> None:
    async with hosted(text_session(**UNINTERRUPTIBLE)) as host, client_of(host) as a, \
            client_of(host) as b:
        results = {}

        async def run(remote, name: str, text: str) -> None:
            results[name] = await remote.run(text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, a, "a", "weather in Paris?")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(run, b, "b", "hello")
        assert [e.type for e in results["a"].events] == [
            "message", "function_call", "function_call_output", "message"]
        assert [e.item.text_content for e in results["b"].events] == ["Hi there!"]
        assert results["a"].events[-1].item.created_at <= results["b"].events[0].item.created_at


async def test_a_run_arriving_interrupts_the_turn_being_played(autojump_clock) -> None:
    async with hosted() as host, client_of(host) as a, client_of(host) as b:
        results = {}

        async def run(remote, name: str, text: str) -> None:
            results[name] = await remote.run(text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, a, "a", "slow")
            await trio.sleep(5.5)  # "a slow answer" is streaming
            nursery.start_soon(run, b, "b", "hello")
        assert [(e.item.text_content, e.item.interrupted) for e in results["b"].events] == [
            ("Hi there!", False)]
        assert [e.item.interrupted for e in results["a"].events] == [True]


async def test_a_request_given_up_by_the_client_is_dropped_by_the_host(autojump_clock) -> None:
    async with hosted(start=False) as host, client_of(host) as remote:
        for _ in range(40):  # more than max_pending_requests, had they leaked
            with trio.move_on_after(0.5):
                await remote.wait_for_ready()
        await trio.testing.wait_all_tasks_blocked()
        assert host.statistics().pending_requests == 0
        assert remote.statistics().pending_requests == 0
        assert (await remote.get_session_state()).ready is False


async def test_a_turn_abandoned_before_it_starts_is_skipped(autojump_clock) -> None:
    session = text_session(**UNINTERRUPTIBLE)
    async with hosted(session) as host, client_of(host) as a, client_of(host) as b:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.run, "slow")
            await trio.sleep(0.5)
            with trio.move_on_after(1):
                await b.run("hello")  # queued behind "slow", then given up
        assert host.statistics().queued_turns == 0
        user_turns = [i.text_content for i in session.history.items
                      if i.type == "message" and i.role == "user"]
        assert user_turns == ["slow"]


async def test_the_events_of_a_turn_arrive_before_its_reply(autojump_clock) -> None:
    """Events are queued when the session emits them, so a client that sees a turn's reply
    has seen the items the turn added (not so with a pump task behind the reply)."""
    async with hosted() as host, client_of(host) as remote:
        await remote.subscribe(["conversation_item_added"])
        added: list[str] = []
        remote.on("conversation_item_added", lambda ev: added.append(ev.item.text_content))
        for _ in range(10):
            result = await remote.run("weather in Paris?")
            assert added[-1] == result.events[-1].item.text_content == "It is sunny in Paris."
            result = await remote.run("hello")
            assert added[-1] == "Hi there!"


async def test_streamed_events_iterate_until_the_session_closes(autojump_clock) -> None:
    session = text_session()
    async with hosted(session) as host, client_of(host) as remote:
        await remote.subscribe()
        names: list[str] = []
        async with trio.open_nursery() as nursery:
            async def collect() -> None:
                async with remote.events() as events:
                    async for event in events:
                        names.append(event.type)

            nursery.start_soon(collect)
            await remote.run("hello")
            await session.aclose()
        assert names[0] == "speech_created" and names[-1] == "close"
        assert {"conversation_item_added", "agent_state_changed", "metrics_collected"} <= set(names)
        assert remote.closed
