"""Requests that arrive while the served session is in a transitional window: starting,
handing off between agents, draining for a close, closing or closed; and hosts and sessions
that close under clients with requests in flight.

The invariants each test checks: every request is answered exactly once (a reply or a typed
error), a client's request never disturbs what the session does for others (no reply of
another client cut), and the host ends with no connection, pending request or queued turn.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_trio import (Agent, RemoteSessionClosedError, SessionHost,
                         open_remote_session)
from agents_trio.remote import wire
from remote_helpers import RawClient, Weather, attach, client_of, hosted, text_session


async def _outcome(remote: Any, text: str) -> Any:
    """The turn's messages as (text, interrupted), or the error it raised."""
    try:
        result = await remote.run(text)
    except Exception as e:  # noqa: BLE001 - the outcome is what the test checks
        return e
    return [(e.item.text_content, e.item.interrupted) for e in result.events
            if e.type == "message"]


# -- starting ---------------------------------------------------------------------------------

async def test_a_session_started_before_its_host_serves_is_ready(autojump_clock) -> None:
    """The docs say a session may be started before or after the host. One started between
    the host's creation and its serving was never seen as ready: ``run`` was refused with
    ``not_ready`` and ``wait_for_ready`` hung while the agent ran."""
    session = text_session()
    async with session:
        host = SessionHost(session, listeners=[])
        await session.start(Weather())
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            async with client_of(host) as remote:
                with trio.fail_after(1):
                    assert await remote.wait_for_ready() == "weather"
                state = await remote.get_session_state()
                assert (state.ready, state.agent_id) == (True, "weather")
                assert (await remote.get_agent_info()).id == "weather"
                assert await _outcome(remote, "hello") == [("Hi there!", False)]
            await host.aclose()


async def test_requests_to_a_closed_session_get_session_closed_at_once(autojump_clock) -> None:
    """A host made for a session that has already closed answers at once with
    ``session_closed`` (an error reply, or the goodbye when the host stopped before it read
    the request; the client raises the same either way), never ``not_ready`` or a wait."""
    session = text_session()
    async with session:
        await session.start(Weather())
    host = SessionHost(session, listeners=[])
    async with trio.open_nursery() as nursery:
        await nursery.start(host.serve)
        async with open_remote_session(attach(host, nursery)) as remote:
            for call in (remote.wait_for_ready, remote.get_agent_info,
                         lambda: remote.run("hello")):
                with pytest.raises(RemoteSessionClosedError) as info:
                    await call()
                assert info.value.code == "session_closed"
        assert trio.current_time() == 0


# -- draining and handing off ------------------------------------------------------------------

async def test_a_run_arriving_while_the_session_drains_does_not_cut_its_last_words(
        autojump_clock) -> None:
    """``shutdown(drain=True)`` lets the agent finish what it says. A turn that arrives then
    cannot be taken (the session closes after the drain); its barge-in used to cut the reply
    being played anyway, so another client's turn lost its answer for nothing."""
    session = text_session()
    async with hosted(session) as host, client_of(host) as a, client_of(host) as b:
        outcomes: dict[str, Any] = {}

        async def run(name: str, remote: Any, text: str) -> None:
            outcomes[name] = await _outcome(remote, text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "a", a, "slow")
            await trio.sleep(1)
            session.shutdown(drain=True)
            await trio.sleep(1)
            nursery.start_soon(run, "b", b, "hello")
        assert outcomes["a"] == [("a slow answer", False)]
        assert isinstance(outcomes["b"], RemoteSessionClosedError)
        assert outcomes["b"].code == "session_closed"
        replies = [(i.text_content, i.interrupted) for i in session.history.items
                   if i.type == "message" and i.role == "assistant"]
        assert replies == [("a slow answer", False)]
    stats = host.statistics()
    assert (stats.connections, stats.pending_requests) == (0, 0)


class Other(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the other agent.")


async def test_a_run_arriving_during_a_handoff_waits_for_the_new_agent(autojump_clock) -> None:
    """A handoff lets the old agent finish its queued speech; a turn typed meanwhile goes to
    the new agent once it runs, without cutting the old agent's words (its own client's
    answer)."""
    session = text_session()
    async with hosted(session) as host, client_of(host) as a, client_of(host) as b:
        outcomes: dict[str, Any] = {}

        async def run(name: str, remote: Any, text: str) -> None:
            outcomes[name] = await _outcome(remote, text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "a", a, "slow")
            await trio.sleep(1)
            session.update_agent(Other())
            await trio.sleep(1)
            nursery.start_soon(run, "b", b, "hello")
        assert outcomes["a"] == [("a slow answer", False)]
        assert outcomes["b"] == [("Hi there!", False)]
        assert (await b.get_agent_info()).id == "other"
        types = [i.type for i in session.history.items]
        assert types.index("agent_handoff", 1) < len(types) - 2  # "hello" follows the handoff
    stats = host.statistics()
    assert (stats.connections, stats.pending_requests, stats.queued_turns) == (0, 0, 0)


# -- any interleaving ---------------------------------------------------------------------------

_CLIENTS = ("a", "b")
_requests = st.one_of(
    st.sampled_from(["hello", "slow", "weather in Paris?", "boom"]).map(
        lambda text: ("run", text)),
    st.sampled_from(["wait_for_ready", "history", "agent_info", "state", "subscribe",
                     "cancel"]).map(lambda kind: (kind, None)),
)
_steps = st.lists(st.one_of(
    st.tuples(st.just("send"), st.sampled_from(_CLIENTS), _requests),
    st.tuples(st.just("vanish"), st.sampled_from(_CLIENTS), st.none()),
    st.tuples(st.just("sleep"), st.none(), st.sampled_from([0.0, 0.3, 1.0, 3.0, 7.0])),
    st.tuples(st.sampled_from(["start", "handoff", "drain", "close", "host_close"]),
              st.none(), st.none()),
), min_size=1, max_size=25)


def _request(kind: str, text: str | None, request_id: int, sent: list[int]) -> wire.Message:
    if kind == "run":
        assert text is not None
        return wire.Run(id=request_id, text=text)
    if kind == "cancel":
        return wire.Cancel(id=sent[-1] if sent else 0)
    return {"wait_for_ready": wire.WaitForReady, "history": wire.GetChatHistory,
            "agent_info": wire.GetAgentInfo, "state": wire.GetSessionState,
            "subscribe": wire.Subscribe}[kind](id=request_id)


class _Client:
    """A raw client and everything it sent and received."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.raw = RawClient(stream)
        self.sent: list[int] = []
        self.waits: set[int] = set()
        self.cancelled: set[int] = set()
        self.messages: list[Any] = []
        self.vanished = False
        self.ended = trio.Event()

    async def read(self) -> None:
        try:
            while (message := await self.raw.receive()) is not None:
                self.messages.append(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.ended.set()

    def answers(self) -> collections.Counter[int | None]:
        return collections.Counter(m.id for m in self.messages
                                   if m.kind not in ("event", "goodbye"))

    @property
    def said_goodbye(self) -> bool:
        return any(m.kind == "goodbye" for m in self.messages)


async def _interleave(steps: list[tuple[str, Any, Any]]) -> None:
    session = text_session()
    closed_by_test = started = False
    async with session, trio.open_nursery() as outer:
        host = SessionHost(session, listeners=[], max_pending_requests=4, close_grace=1.0)
        await outer.start(host.serve)
        clients: dict[str, _Client] = {}
        for name in _CLIENTS:
            clients[name] = _Client(attach(host, outer))
            outer.start_soon(clients[name].read)
        ids = iter(range(1, 1000))
        for step, who, arg in steps:
            if step == "send":
                client = clients[who]
                if client.vanished:
                    continue
                message = _request(*arg, next(ids), client.sent)
                try:
                    await client.raw.send(message)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    continue
                if isinstance(message, wire.Cancel):
                    client.cancelled.add(message.id)
                else:
                    client.sent.append(message.id)
                    if isinstance(message, wire.WaitForReady):
                        client.waits.add(message.id)
            elif step == "vanish":
                clients[who].vanished = True
                await clients[who].raw.stream.aclose()
            elif step == "sleep":
                await trio.sleep(arg)
            elif step == "start":
                if not started and not closed_by_test:
                    started = True
                    outer.start_soon(session.start, Weather())
            elif step == "handoff":
                session.update_agent(Other())
            elif step == "drain":
                closed_by_test = True
                session.shutdown(drain=True)
            elif step == "close":
                closed_by_test = True
                outer.start_soon(session.aclose)
            else:
                closed_by_test = True
                outer.start_soon(host.aclose)
            await trio.lowlevel.checkpoint()
        await trio.sleep(60)  # every turn and drain is over: every open connection answered
        for client in clients.values():
            answers = client.answers()
            assert all(count == 1 for request_id, count in answers.items()
                       if request_id is not None), client.messages
            if not client.vanished and not client.said_goodbye:
                unanswered = set(client.sent) - set(answers) - client.cancelled
                if session.state.value == "entered":  # never started: still waiting, rightly
                    unanswered -= client.waits
                assert not unanswered, (unanswered, client.messages)
            for message in client.messages:
                if message.kind == "error":
                    assert message.code in str(wire.ErrorCode) and message.message
        if not closed_by_test and session.state.value == "running":
            # no client's request or departure disturbed the session
            async with client_of(host) as remote:
                assert await _outcome(remote, "hello") == [("Hi there!", False)]
        # a close at any moment finishes, within its grace, with nothing left running
        with trio.fail_after(10):
            await session.aclose()
            await host.aclose()
            for client in clients.values():
                await client.ended.wait()
        stats = host.statistics()
        assert (stats.connections, stats.pending_requests) == (0, 0)
        for client in clients.values():
            assert client.vanished or client.said_goodbye, client.messages


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_steps)
def test_requests_in_any_window_are_answered_once_and_the_close_ends_everything(
        steps: list[tuple[str, Any, Any]]) -> None:
    trio.run(_interleave, steps, clock=trio.testing.MockClock(autojump_threshold=0))
