"""Bad input to a SessionHost: each case gets a clear error and/or closes that connection only.

After each case the test checks that the session and another client still work, and that the
host holds no pending request or connection it should have let go.
"""

from __future__ import annotations

import msgspec
import pytest
import trio
import trio.testing

from agents_trio import AgentSession, RemoteConnectionError, RemoteSessionError, SessionHost
from agents_trio.remote import wire
from agents_trio.testing import FakeActions, FakeLLM
from remote_helpers import RawClient, attach, client_of, frame_of, hosted

async def _still_serves(host: SessionHost) -> None:
    """Another client can run a turn: the session and the host are fine."""
    async with client_of(host) as remote:
        result = await remote.run("hello")
        assert [e.item.text_content for e in result.events] == ["Hi there!"]


async def _settled(host: SessionHost, *, connections: int) -> None:
    await trio.testing.wait_all_tasks_blocked()
    stats = host.statistics()
    assert (stats.connections, stats.pending_requests, stats.queued_turns) == (connections, 0, 0)


@pytest.mark.parametrize(("payload", "code", "request_id", "text"), [
    (b"\xc1\xc1", "malformed_message", None, "malformed message"),
    (msgspec.msgpack.encode(["not", "a", "map"]), "malformed_message", None, "Expected `object`"),
    (msgspec.msgpack.encode({"kind": "run", "v": 1, "id": 4}), "malformed_message", 4,
     "missing required field `text`"),
    (msgspec.msgpack.encode({"kind": "dance", "v": 1, "id": 5}), "unknown_message_type", 5,
     "unknown message type 'dance'"),
    (msgspec.msgpack.encode({"kind": "run", "v": 7, "id": 6, "text": "x"}),
     "unsupported_version", 6, "unsupported protocol version 7"),
    (msgspec.msgpack.encode({"kind": "run", "v": 1, "id": 7, "text": "  "}), "bad_request", 7,
     "non-empty text"),
    (b"", "malformed_message", None, "truncated"),
])
async def test_a_bad_frame_gets_a_clear_error_and_the_connection_goes_on(
        payload: bytes, code: str, request_id: int | None, text: str, autojump_clock) -> None:
    async with hosted() as host, trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        await raw.send(frame_of(payload))
        error = await raw.receive()
        assert isinstance(error, wire.ErrorReply)
        assert (error.code, error.id) == (code, request_id)
        assert text in error.message
        await raw.send(wire.Run(id=100, text="hello"))
        reply = await raw.receive()
        assert isinstance(reply, wire.RunReply) and reply.id == 100
        await _still_serves(host)
        await raw.stream.aclose()
        await _settled(host, connections=0)


async def test_a_duplicate_pending_request_id_is_refused(autojump_clock) -> None:
    async with hosted() as host, trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        await raw.send(wire.Run(id=1, text="slow"))
        await raw.send(wire.Run(id=1, text="hello"))
        error = await raw.receive()
        assert (error.kind, error.id, error.code) == ("error", 1, "duplicate_request_id")
        reply = await raw.receive()
        assert (reply.kind, reply.id) == ("run_reply", 1)
        assert reply.items[0].content == ["a slow answer"]
        await raw.stream.aclose()


async def test_a_frame_over_the_size_limit_closes_that_connection_only(autojump_clock) -> None:
    async with hosted(max_frame_size=1024) as host, client_of(host) as bystander, \
            trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        await raw.send(wire.Run(id=1, text="x" * 2000))
        error, goodbye, *rest = await raw.receive_all()
        assert (error.code, error.id) == ("frame_too_large", None)
        assert "exceeds the limit of 1024 bytes" in error.message
        assert goodbye.kind == "goodbye" and goodbye.code == "frame_too_large"
        assert rest == []
        # a client refuses to send such a request at all
        with pytest.raises(wire.FrameTooLargeError):
            await bystander.run("x" * (1 << 20))
        assert (await bystander.run("hello")).events
        await _settled(host, connections=1)


async def test_a_huge_announced_frame_is_refused_before_it_is_read(autojump_clock) -> None:
    async with hosted() as host, trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        await raw.send(b"\xff\xff\xff\xff")
        error, goodbye = await raw.receive_all()
        assert error.code == goodbye.code == "frame_too_large"
        await _still_serves(host)
        await _settled(host, connections=0)


async def test_a_truncated_frame_closes_that_connection_only(autojump_clock) -> None:
    async with hosted() as host, trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        frame = wire.encode_frame(wire.Run(id=1, text="hello"))
        await raw.send(frame[:7])
        await raw.stream.send_eof()
        error, goodbye = await raw.receive_all()
        assert error.code == goodbye.code == "truncated_frame"
        assert "middle of a frame" in error.message
        await _still_serves(host)
        await _settled(host, connections=0)


async def test_a_client_leaving_mid_turn_does_not_disturb_the_session(autojump_clock) -> None:
    async with hosted() as host, client_of(host) as bystander, trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        await raw.send(wire.Run(id=1, text="slow"))
        await trio.sleep(1)
        assert host.statistics().pending_requests == 1
        await raw.stream.aclose()
        await trio.sleep(0.1)
        assert host.statistics().connections == 1
        # the turn it started still finishes in the session (a turn arriving earlier would
        # interrupt it: typing is a barge-in), then the next one runs
        await trio.sleep(6)
        result = await bystander.run("hello")
        assert [e.item.text_content for e in result.events] == ["Hi there!"]
        history = [i.text_content for i in host._session.history.items if i.type == "message"]
        assert history[-3:] == ["a slow answer", "hello", "Hi there!"]
        await _settled(host, connections=1)


async def test_a_flood_of_requests_is_answered_in_order_and_bounded(autojump_clock) -> None:
    async with hosted(max_pending_requests=4) as host, trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        cheap = [wire.GetSessionState(id=i) for i in range(500)]
        runs = [wire.Run(id=1000 + i, text="hello") for i in range(10)]
        await raw.send(b"".join(wire.encode_frame(m) for m in cheap + runs))
        replies = [await raw.receive() for _ in range(510)]
        assert [r.id for r in replies[:500]] == list(range(500))
        refused = [r for r in replies if r.kind == "error"]
        assert {r.code for r in refused} == {"too_many_requests"} and len(refused) == 6
        assert sorted(r.id for r in replies if r.kind == "run_reply") == [1000, 1001, 1002, 1003]
        await _still_serves(host)
        await raw.stream.aclose()
        await _settled(host, connections=0)


async def test_a_client_that_does_not_read_is_disconnected(autojump_clock) -> None:
    async with hosted(max_outbox=8) as host, client_of(host) as bystander, \
            trio.open_nursery() as nursery:
        client_stream, server_stream = trio.testing.lockstep_stream_pair()
        nursery.start_soon(host.serve_stream, server_stream)
        raw = RawClient(client_stream)
        flood = b"".join(wire.encode_frame(wire.GetChatHistory(id=i)) for i in range(50))
        with trio.move_on_after(5):
            try:
                await raw.send(flood)
            except trio.BrokenResourceError:
                pass
        await trio.testing.wait_all_tasks_blocked()
        assert host.statistics().connections_overflowed == 1
        assert (await bystander.run("hello")).events
        await _settled(host, connections=1)


async def test_connections_over_the_limit_are_refused(autojump_clock) -> None:
    """A subscriber keeps its slot, so the newcomer is refused once it waited its
    ``admission_timeout`` (see test_remote_deadlines.py for the slots that are given up)."""
    async with hosted(max_connections=1) as host, client_of(host) as first, \
            trio.open_nursery() as nursery:
        await first.subscribe()
        raw = RawClient(attach(host, nursery))
        error, goodbye = await raw.receive_all()
        assert error.code == goodbye.code == "too_many_connections"
        assert (await first.get_session_state()).ready


async def test_a_reply_over_the_limit_becomes_an_error(autojump_clock) -> None:
    """A turn's reply is not paged: over the limit, it is an error for that request only."""
    actions = FakeActions().add_llm("z" * 1000, input="long", ttft=0.0, duration=0.0)
    session = AgentSession(llm=FakeLLM(actions.llm_responses))
    async with hosted(session, max_frame_size=600) as host, client_of(host) as remote:
        with pytest.raises(RemoteSessionError, match="exceeds the limit of 600") as info:
            await remote.run("long")
        assert info.value.code == "response_too_large"
        assert (await remote.get_session_state()).ready
        # the history has it, shortened to fit (see test_remote_history.py)
        history = (await remote.get_chat_history()).items
        last = [i.text_content for i in history if i.type == "message"][-1]
        assert last.startswith("z" * 100) and "truncated: 1000 characters" in last


async def test_a_host_speaking_garbage_ends_the_client_with_a_clear_error(autojump_clock) -> None:
    from agents_trio import open_remote_session

    client_stream, server_stream = trio.testing.memory_stream_pair()
    async with open_remote_session(client_stream) as remote:
        async with trio.open_nursery() as nursery:
            async def ask() -> None:
                with pytest.raises(RemoteConnectionError, match="bad frame from the host"):
                    await remote.get_session_state()

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            await server_stream.send_all(b"\xff\xff\xff\xff")
        assert remote.closed
