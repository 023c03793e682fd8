"""The LiveKit-protocol host keeps the msgpack host's hardening: clear errors for bad
messages, one response per request, frame/pending/connection limits, deadlines, bounded
history replies, and a host that goes on serving."""

from __future__ import annotations

import pytest
import trio

pytest.importorskip("livekit.protocol")

from agents_trio.remote import lk  # noqa: E402
from agents_trio.remote.lk.codec import pb  # noqa: E402
from lk_helpers import LkRawClient, lk_attach, lk_hosted, ping, request, run_input  # noqa: E402
from remote_helpers import text_session  # noqa: E402


def frame_of(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


async def test_requests_are_answered_with_livekit_semantics(autojump_clock) -> None:
    async with lk_hosted() as host, trio.open_nursery() as nursery:
        c = LkRawClient(lk_attach(host, nursery))
        await c.send(ping("p1"))
        assert (await c.response()).WhichOneof("response") == "pong"
        await c.send(run_input("r1", "hello"))
        resp = await c.response()
        assert resp.request_id == "r1" and not resp.error
        assert [i.message.content[0].text for i in resp.run_input.items] == ["Hi there!"]
        await c.send(run_input("r2", "   "))
        resp = await c.response()
        assert resp.request_id == "r2" and resp.error == "empty run_input text"
        assert resp.WhichOneof("response") == "run_input"  # LiveKit answers both
        await c.send(run_input("r3", "boom"))
        resp = await c.response()
        assert resp.request_id == "r3" and "the model is down" in resp.error
        await c.send(request("u1", update_io=pb.SessionRequest.UpdateIO()))
        assert (await c.response()).WhichOneof("response") == "update_io"
        await c.send(request("s1", get_session_usage=pb.SessionRequest.GetSessionUsage()))
        assert (await c.response()).WhichOneof("response") == "get_session_usage"
        await c.send(request("t1", get_rtc_stats=pb.SessionRequest.GetRTCStats()))
        assert (await c.response()).WhichOneof("response") == "get_rtc_stats"
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("raw", "request_id", "text"), [
    (frame_of(b"\xff\xff\xff"), "", "not an AgentSessionMessage"),
    (frame_of(b""), "", "carries nothing"),
    (lk.codec.encode_message(request("")), "", "no request_id"),
    (lk.codec.encode_message(request("x1")), "x1", "no known request type"),
    # a request kind from the future: field 99 of SessionRequest, unknown here
    (frame_of(pb.AgentSessionMessage(request=pb.SessionRequest(request_id="x2"))
              .SerializeToString() + b""), "x2", "no known request type"),
])
async def test_a_bad_message_gets_a_clear_error_and_the_connection_goes_on(
        raw: bytes, request_id: str, text: str, autojump_clock) -> None:
    async with lk_hosted() as host, trio.open_nursery() as nursery:
        c = LkRawClient(lk_attach(host, nursery))
        await c.send(raw)
        resp = await c.response()
        assert resp.request_id == request_id and text in resp.error
        await c.send(ping("after"))
        resp = await c.response()
        assert resp.request_id == "after" and resp.WhichOneof("response") == "pong"
        nursery.cancel_scope.cancel()


async def test_messages_a_host_does_not_take_are_ignored(autojump_clock) -> None:
    async with lk_hosted() as host, trio.open_nursery() as nursery:
        c = LkRawClient(lk_attach(host, nursery))
        await c.send(pb.AgentSessionMessage(response=pb.SessionResponse(request_id="zz")))
        await c.send(pb.AgentSessionMessage(event=pb.AgentSessionEvent()))
        await c.send(ping("p"))
        resp = await c.response()
        assert resp.request_id == "p" and not resp.error
        assert host.statistics().messages_ignored == 2
        nursery.cancel_scope.cancel()


async def test_a_duplicate_pending_request_id_is_refused(autojump_clock) -> None:
    async with lk_hosted() as host, trio.open_nursery() as nursery:
        c = LkRawClient(lk_attach(host, nursery))
        await c.send(run_input("same", "slow"))
        await c.send(run_input("same", "hello"))
        first = await c.response()
        assert first.request_id == "same" and "already pending" in first.error
        second = await c.response()
        assert second.request_id == "same" and not second.error
        assert second.run_input.items[-1].message.content[0].text == "a slow answer"
        nursery.cancel_scope.cancel()


async def test_pending_requests_are_limited_per_connection(autojump_clock) -> None:
    async with lk_hosted(max_pending_requests=2) as host, trio.open_nursery() as nursery:
        c = LkRawClient(lk_attach(host, nursery))
        for i in range(3):
            await c.send(run_input(f"r{i}", "slow"))
        refused = await c.response()
        assert refused.request_id == "r2" and "too many pending requests" in refused.error
        rest = [await c.response(), await c.response()]
        assert sorted(r.request_id for r in rest) == ["r0", "r1"]
        nursery.cancel_scope.cancel()


async def test_a_frame_over_the_limit_closes_that_connection_only(autojump_clock) -> None:
    async with lk_hosted(max_frame_size=1024) as host, trio.open_nursery() as nursery:
        bad = LkRawClient(lk_attach(host, nursery))
        good = LkRawClient(lk_attach(host, nursery))
        await bad.send((1 << 30).to_bytes(4, "big") + b"x" * 10)
        answers = await bad.responses_until_closed()
        assert len(answers) == 1 and "exceeds the limit" in answers[0].error
        await good.send(ping("g"))
        assert (await good.response()).request_id == "g"
        nursery.cancel_scope.cancel()


async def test_a_truncated_frame_closes_that_connection_only(autojump_clock) -> None:
    async with lk_hosted() as host, trio.open_nursery() as nursery:
        bad_stream = lk_attach(host, nursery)
        await bad_stream.send_all(frame_of(b"\x22\x05\x0a\x01a\x12\x00")[:6])
        await bad_stream.send_eof()
        answers = await LkRawClient(bad_stream).responses_until_closed()
        assert len(answers) == 1 and "ended in the middle of a frame" in answers[0].error
        good = LkRawClient(lk_attach(host, nursery))
        await good.send(ping("g"))
        assert (await good.response()).request_id == "g"
        nursery.cancel_scope.cancel()


async def test_a_frame_that_never_ends_hits_the_read_deadline(autojump_clock) -> None:
    async with lk_hosted(read_timeout=3.0) as host, trio.open_nursery() as nursery:
        c = LkRawClient(lk_attach(host, nursery))
        start = trio.current_time()
        await c.send(frame_of(b"x" * 100)[:20])
        answers = await c.responses_until_closed()
        assert len(answers) == 1 and "read timeout" in answers[0].error
        assert 3.0 <= trio.current_time() - start < 3.5
        nursery.cancel_scope.cancel()


async def test_an_idle_connection_is_closed_when_asked(autojump_clock) -> None:
    async with lk_hosted(idle_timeout=60.0) as host, trio.open_nursery() as nursery:
        c = LkRawClient(lk_attach(host, nursery))
        await c.send(ping("p"))
        await c.response()
        answers = await c.responses_until_closed()
        assert len(answers) == 1 and "idle timeout" in answers[0].error
        assert host.statistics().connections_timed_out == 1
        nursery.cancel_scope.cancel()


async def test_connections_over_the_limit_wait_then_are_refused(autojump_clock) -> None:
    async with lk_hosted(max_connections=1, admission_timeout=2.0) as host, \
            trio.open_nursery() as nursery:
        busy = LkRawClient(lk_attach(host, nursery))
        await busy.send(run_input("r", "slow"))  # a request in flight: never evicted
        await trio.sleep(0.1)
        late = LkRawClient(lk_attach(host, nursery))
        answers = await late.responses_until_closed()
        assert len(answers) == 1 and "too many connections" in answers[0].error
        assert (await busy.response()).request_id == "r"
        nursery.cancel_scope.cancel()


async def test_a_quiet_connection_makes_room_for_a_newcomer(autojump_clock) -> None:
    async with lk_hosted(max_connections=1, idle_timeout_when_full=1.0) as host, \
            trio.open_nursery() as nursery:
        quiet = LkRawClient(lk_attach(host, nursery))
        await quiet.send(ping("q"))
        await quiet.response()
        newcomer = LkRawClient(lk_attach(host, nursery))
        await newcomer.send(ping("n"))
        assert (await newcomer.response()).request_id == "n"
        answers = await quiet.responses_until_closed()
        assert len(answers) == 1 and "make room" in answers[0].error
        nursery.cancel_scope.cancel()


async def test_the_chat_history_reply_fits_the_frame_limit(autojump_clock) -> None:
    async with lk_hosted(max_frame_size=2048) as host, trio.open_nursery() as nursery:
        session = host._session
        for i in range(100):
            session.history.add_message(role="user", content=f"message {i:03d} " + "x" * 50)
        c = LkRawClient(lk_attach(host, nursery))
        await c.send(request("h", get_chat_history=pb.SessionRequest.GetChatHistory()))
        resp = await c.response()
        assert not resp.error and 0 < len(resp.get_chat_history.items) < 100
        assert resp.ByteSize() <= 2048
        texts = [i.message.content[0].text for i in resp.get_chat_history.items]
        assert texts[-1].startswith("message 099") and texts == sorted(texts)
        nursery.cancel_scope.cancel()


async def test_before_the_agent_starts_ping_and_run_say_not_ready(autojump_clock) -> None:
    async with lk_hosted(start=False) as host, trio.open_nursery() as nursery:
        c = LkRawClient(lk_attach(host, nursery))
        await c.send(ping("p"))
        assert "not started an agent" in (await c.response()).error
        await c.send(run_input("r", "hello"))
        assert "not started an agent" in (await c.response()).error
        await c.send(request("h", get_chat_history=pb.SessionRequest.GetChatHistory()))
        assert not (await c.response()).error
        nursery.cancel_scope.cancel()


async def test_the_session_closing_answers_pending_requests(autojump_clock) -> None:
    session = text_session()
    async with trio.open_nursery() as nursery:
        async with lk_hosted(session) as host:
            c = LkRawClient(lk_attach(host, nursery))
            await c.send(run_input("r", "slow"))
            await trio.sleep(1.0)
            await session.aclose()
            answers = await c.responses_until_closed()
        assert [a.request_id for a in answers] == ["r"] and answers[0].error


async def test_a_client_that_does_not_read_is_disconnected(autojump_clock) -> None:
    async with lk_hosted(max_outbox=4) as host, trio.open_nursery() as nursery:
        client, server = trio.testing.lockstep_stream_pair()
        nursery.start_soon(host.serve_stream, server)
        broken = False
        for i in range(50):
            with trio.move_on_after(1):
                try:
                    await client.send_all(lk.codec.encode_message(ping(f"p{i}")))
                except trio.BrokenResourceError:
                    broken = True  # the host hung up on it
                    break
        assert broken
        await trio.sleep(5)
        assert host.statistics().connections_overflowed == 1
        assert host.statistics().connections == 0
        nursery.cancel_scope.cancel()
