"""Hostile clients that hold connections without using them: slow lorises, stalled frames,
idle connections, and a full host.

Most tests run on memory streams under the autojump clock and assert Trio times; one repeats
the slow-loris attack over real loopback TCP (127.0.0.1), bounded by ``fail_after``.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest
import trio
import trio.testing

from agents_trio import RemoteConnectionError, SessionHost, open_session_host
from agents_trio.remote import wire
from remote_helpers import RawClient, Weather, attach, client_of, hosted, text_session

LORISES = 40
PROBE = wire.encode_frame(wire.GetSessionState(id=7))


async def _drip(stream: trio.abc.SendStream, data: bytes) -> None:
    """Send ``data`` one byte a second, forever (it wraps around) or until the host hangs up."""
    for byte in itertools.cycle(data):
        try:
            await stream.send_all(bytes([byte]))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        await trio.sleep(1)


async def _loris(connect: Any, goodbyes: list[str], *, rounds: int) -> None:
    """One slow-loris client: drips a request one byte a second and reconnects at once each
    time the host drops it (``rounds`` connections in all)."""
    for _ in range(rounds):
        stream = await connect()
        raw = RawClient(stream)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drip, stream, PROBE)
                try:
                    messages = await raw.receive_all()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    messages = []
                nursery.cancel_scope.cancel()
        finally:
            await trio.aclose_forcefully(stream)
        if messages and messages[-1].kind == "goodbye":
            goodbyes.append(messages[-1].code)


async def _probe(stream: trio.abc.Stream) -> Any:
    """A well-behaved client: one whole request at once, then its answer."""
    raw = RawClient(stream)
    try:
        await raw.send(PROBE)
        return await raw.receive()
    finally:
        await trio.aclose_forcefully(stream)


async def test_forty_slow_lorises_do_not_lock_a_probe_out(autojump_clock) -> None:
    """The issue's attack: 40 clients sending one byte a second (and reconnecting at once when
    dropped) against the default 32 slots. A probe must be served within 2 s."""
    async with hosted() as host, trio.open_nursery() as attack:
        async def connect() -> trio.abc.Stream:
            return attach(host, attack)

        goodbyes: list[str] = []
        for _ in range(LORISES):
            attack.start_soon(lambda: _loris(connect, goodbyes, rounds=40))
        await trio.sleep(5.5)
        assert host.statistics().connections == 32  # the lorises hold every slot
        with trio.fail_after(30):
            start = trio.current_time()
            reply = await _probe(attach(host, attack))
            waited = trio.current_time() - start
        assert isinstance(reply, wire.SessionStateReply) and reply.id == 7, reply
        assert waited <= 2.0
        print(f"probe served after {waited:.3f} s of Trio time")
        stats = host.statistics()
        assert stats.connections_evicted > 0
        assert "idle_timeout" in goodbyes
        attack.cancel_scope.cancel()


async def test_slow_lorises_over_loopback_tcp_do_not_lock_a_probe_out() -> None:
    """The same attack over real sockets on 127.0.0.1 (the real clock): the probe is served
    within 2 s (``fail_after``)."""
    with trio.fail_after(20):
        async with text_session(fast=True) as session, \
                open_session_host(session, port=0) as host, trio.open_nursery() as attack:
            await session.start(Weather())

            async def connect() -> trio.abc.Stream:
                return await trio.open_tcp_stream("127.0.0.1", host.port)

            goodbyes: list[str] = []
            for _ in range(LORISES):
                attack.start_soon(lambda: _loris(connect, goodbyes, rounds=6))
            while host.statistics().connections < 32:  # every slot is taken
                await trio.sleep(0.01)
            await trio.sleep(0.1)  # and the other lorises knock
            start = trio.current_time()
            with trio.fail_after(2):
                reply = await _probe(await trio.open_tcp_stream("127.0.0.1", host.port))
            assert isinstance(reply, wire.SessionStateReply) and reply.id == 7, reply
            print(f"probe served after {trio.current_time() - start:.3f} s (real clock); "
                  f"{host.statistics().connections_evicted} lorises evicted")
            attack.cancel_scope.cancel()


async def test_a_stalled_partial_frame_is_a_read_timeout(autojump_clock, caplog) -> None:
    caplog.set_level(logging.INFO, logger="agents_trio.remote")
    async with hosted() as host, trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        start = trio.current_time()
        await raw.send(PROBE[:5])
        with trio.fail_after(60):
            messages = await raw.receive_all()
        assert [m.kind for m in messages] == ["goodbye"]
        assert messages[0].code == "read_timeout"
        assert "10" in messages[0].message
        assert trio.current_time() - start == pytest.approx(10.0)
        logged = [r.getMessage() for r in caplog.records if r.name == "agents_trio.remote"]
        assert any(m.startswith("closing a connection (read_timeout): a frame took more than "
                                "10 s") for m in logged), logged
        assert host.statistics().connections_timed_out == 1


async def test_a_frame_dripped_a_byte_a_second_is_cut_at_the_read_timeout(
        autojump_clock) -> None:
    """The deadline is for the whole frame, not between bytes: a loris never stalls."""
    async with hosted(read_timeout=4.0) as host, trio.open_nursery() as nursery:
        stream = attach(host, nursery)
        nursery.start_soon(_drip, stream, PROBE)
        start = trio.current_time()
        with trio.fail_after(60):
            messages = await RawClient(stream).receive_all()
        assert [(m.kind, m.code) for m in messages] == [("goodbye", "read_timeout")]
        # the first byte starts the frame's clock
        assert trio.current_time() - start == pytest.approx(4.0)
        nursery.cancel_scope.cancel()


async def test_requests_in_time_keep_a_connection_open(autojump_clock) -> None:
    async with hosted(read_timeout=2.0, idle_timeout=5.0) as host, client_of(host) as remote:
        for _ in range(10):
            await trio.sleep(4)
            assert (await remote.get_session_state()).ready
        assert host.statistics().connections_timed_out == 0


async def test_an_idle_connection_is_closed_after_the_idle_timeout(autojump_clock) -> None:
    async with hosted() as host, client_of(host) as remote:
        await remote.get_session_state()
        start = trio.current_time()
        with trio.fail_after(4000):
            while not remote.closed:
                await trio.sleep(1)
        assert trio.current_time() - start == pytest.approx(3600, abs=1)
        with pytest.raises(RemoteConnectionError, match="idle") as info:
            await remote.get_session_state()
        assert info.value.code == "idle_timeout"


async def test_a_subscribed_or_waiting_connection_is_not_idle(autojump_clock) -> None:
    """A subscriber listens (quiet is normal for it) and a connection waiting for a turn waits
    for the host: neither is dropped for being quiet. Once the turn is answered, the idle clock
    starts from the answer."""
    async with hosted(idle_timeout=3.0) as host, client_of(host) as listener, \
            client_of(host) as runner:
        await listener.subscribe(["agent_state_changed"])
        start = trio.current_time()
        result = await runner.run("slow")  # 6 s: longer than the idle timeout
        answered = trio.current_time()
        assert answered - start > 5 and result.events
        await trio.sleep(20)
        assert not listener.closed
        assert runner.closed
        with pytest.raises(RemoteConnectionError) as info:
            await runner.get_session_state()
        assert info.value.code == "idle_timeout"
        assert (await listener.get_session_state()).ready
        assert host.statistics().connections == 1


async def test_a_newcomer_takes_the_slot_of_an_idle_connection_when_full(autojump_clock) -> None:
    async with hosted(max_connections=1) as host, client_of(host) as idler, \
            trio.open_nursery() as nursery:
        await idler.get_session_state()
        await trio.sleep(30)
        start = trio.current_time()
        reply = await _probe(attach(host, nursery))
        assert isinstance(reply, wire.SessionStateReply)
        # the idler had been idle for 30 s: it gives its slot up at once
        assert trio.current_time() - start == pytest.approx(0, abs=0.01)
        with pytest.raises(RemoteConnectionError, match="full") as info:
            await idler.get_session_state()
        assert info.value.code == "idle_timeout"
        assert host.statistics().connections_evicted == 1


async def test_a_fresh_connection_keeps_its_slot_for_the_grace_when_full(autojump_clock) -> None:
    async with hosted(max_connections=1) as host, client_of(host) as holder, \
            trio.open_nursery() as nursery:
        await holder.get_session_state()
        start = trio.current_time()
        reply = await _probe(attach(host, nursery))
        assert isinstance(reply, wire.SessionStateReply)
        assert trio.current_time() - start == pytest.approx(1.0)  # idle_timeout_when_full


async def test_a_newcomer_waits_for_a_busy_full_host_then_is_refused(autojump_clock) -> None:
    """Subscribers keep their slots even when the host is full: the newcomer waits
    ``admission_timeout`` for one, then gets ``too_many_connections``."""
    async with hosted(max_connections=1) as host, client_of(host) as listener, \
            trio.open_nursery() as nursery:
        await listener.subscribe()
        start = trio.current_time()
        raw = RawClient(attach(host, nursery))
        await trio.sleep(1)
        assert host.statistics().connections_waiting == 1
        error, goodbye = await raw.receive_all()
        assert error.code == goodbye.code == "too_many_connections"
        assert trio.current_time() - start == pytest.approx(5.0)
        assert (await listener.get_session_state()).ready
        assert host.statistics().connections_waiting == 0


async def test_a_full_waiting_room_refuses_at_once(autojump_clock) -> None:
    async with hosted(max_connections=1) as host, client_of(host) as listener, \
            trio.open_nursery() as nursery:
        await listener.subscribe()
        waiting = RawClient(attach(host, nursery))
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        error, goodbye = await RawClient(attach(host, nursery)).receive_all()
        assert error.code == goodbye.code == "too_many_connections"
        assert trio.current_time() == start
        await waiting.stream.aclose()


async def test_a_stopping_host_refuses_the_waiting_room(autojump_clock) -> None:
    async with text_session() as session:
        async with open_session_host(session, listeners=[], max_connections=1) as host:
            await session.start(Weather())
            async with client_of(host) as listener, trio.open_nursery() as nursery:
                await listener.subscribe()
                raw = RawClient(attach(host, nursery))
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(host.aclose)
                messages = await raw.receive_all()
                assert messages[-1].code == "host_closing"


def test_deadline_options_are_checked() -> None:
    for bad in ({"read_timeout": 0}, {"idle_timeout": -1.0}, {"idle_timeout_when_full": 0},
                {"admission_timeout": -2}, {"read_timeout": float("nan")}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SessionHost(text_session(), listeners=[], **bad)
