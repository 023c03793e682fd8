"""Hypothesis against the LiveKit-protocol host's decoder and request loop: random mixes of
valid requests, protobuf-valid but semantically wrong messages (no id, no request kind,
responses, events, console audio sent to a host, duplicate ids, empty texts), garbage bytes,
ended cleanly, by a truncated or an oversized frame, by a client that stalls mid-frame (the
read deadline), or by the client vanishing.

Whatever is drawn: no exception escapes the host and no response says "internal error"; each
request frame gets exactly one response with its id, each unreadable frame one with id "";
the host ends with no connection or pending request; and another client can still run a turn.
Each example runs with ``trio.run`` on an autojump ``MockClock``.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

pytest.importorskip("livekit.protocol")

from agents_trio.remote.lk.codec import (WireError, decode_message, encode_message,  # noqa: E402
                                         pb, request_problem)
from lk_helpers import LkRawClient, lk_attach, lk_hosted, ping, run_input  # noqa: E402

SENTINEL = "sentinel"
TEXTS = ["hello", "weather in Paris?", "boom", "unscripted", "", "slow"]
_ids = st.sampled_from(["a", "b", "c", "", "d"])
R = pb.SessionRequest

_kinds = st.sampled_from([
    ("ping", R.Ping()), ("get_chat_history", R.GetChatHistory()),
    ("get_agent_info", R.GetAgentInfo()), ("get_session_state", R.GetSessionState()),
    ("get_framework_info", R.GetFrameworkInfo()), ("get_session_usage", R.GetSessionUsage()),
    ("get_rtc_stats", R.GetRTCStats()),
    ("update_io", R.UpdateIO(output=R.UpdateIO.Output(audio_enabled=False))),
    ("finalize_simulation", R.FinalizeSimulation(provisional_success=True)),
    (None, None),
])


def _request(request_id: str, kind: tuple[str | None, Any], text: str | None) -> bytes:
    req = pb.SessionRequest(request_id=request_id)
    if text is not None:
        req.run_input.text = text
    elif kind[0] is not None:
        getattr(req, kind[0]).CopyFrom(kind[1])
    return encode_message(pb.AgentSessionMessage(request=req))


_requests = st.builds(_request, _ids, _kinds, st.one_of(st.none(), st.sampled_from(TEXTS)))
_not_for_a_host = st.sampled_from([
    pb.AgentSessionMessage(response=pb.SessionResponse(request_id="a", error="x")),
    pb.AgentSessionMessage(event=pb.AgentSessionEvent(error=pb.AgentSessionEvent.Error())),
    pb.AgentSessionMessage(audio_input=pb.AgentSessionMessage.ConsoleIO.AudioFrame(
        data=b"\x00" * 8, sample_rate=48000, num_channels=1, samples_per_channel=4)),
    pb.AgentSessionMessage(audio_playback_finished=(
        pb.AgentSessionMessage.ConsoleIO.AudioPlaybackFinished())),
    pb.AgentSessionMessage(),
]).map(encode_message)
_garbage = st.binary(max_size=40).map(lambda p: len(p).to_bytes(4, "big") + p)
_frames = st.lists(st.one_of(_requests, _requests, _not_for_a_host, _garbage), min_size=1,
                   max_size=30)
_endings = st.sampled_from(["clean", "truncated", "oversized", "vanish", "stalled"])


def _expected(frames: list[bytes]) -> collections.Counter[str]:
    """How many responses each request id is owed (id "" for unreadable frames)."""
    owed: collections.Counter[str] = collections.Counter({SENTINEL: 1})
    for frame in frames:
        try:
            message = decode_message(frame[4:])
        except WireError:
            owed[""] += 1
            continue
        kind = message.WhichOneof("message")
        if kind is None:
            owed[""] += 1
        elif kind == "request":
            owed[message.request.request_id if request_problem(message.request) is None
                 or message.request.request_id else ""] += 1
    return owed


async def _play(frames: list[bytes], ending: str) -> None:
    async with lk_hosted(max_pending_requests=3, max_frame_size=4096) as host:
        async with trio.open_nursery() as nursery:
            raw = LkRawClient(lk_attach(host, nursery))
            await raw.send(b"".join(frames) + encode_message(
                pb.AgentSessionMessage(request=pb.SessionRequest(
                    request_id=SENTINEL, get_session_state=R.GetSessionState()))))
            responses: list[Any] = []
            while True:
                resp = await raw.response()
                assert resp is not None, "the host closed a healthy connection"
                responses.append(resp)
                if resp.request_id == SENTINEL:
                    break
            await trio.sleep(200)  # let every queued turn finish
            if ending == "truncated":
                await raw.send(encode_message(run_input("t", "hello"))[:6])
            elif ending == "oversized":
                await raw.send(b"\x00\x01\x00\x00")
            elif ending == "stalled":  # a slow client: half a frame, then nothing
                await raw.send(encode_message(run_input("t", "hello"))[:6])
                responses += await raw.responses_until_closed()  # the read deadline cuts it
            if ending == "stalled":
                pass
            elif ending == "vanish":
                await raw.stream.aclose()
            else:
                await raw.stream.send_eof()
                responses += await raw.responses_until_closed()
        owed = _expected(frames)
        if ending in ("truncated", "oversized", "stalled"):
            owed[""] += 1
        got = collections.Counter(r.request_id for r in responses)
        for r in responses:
            assert "internal error" not in r.error
        if ending == "vanish":
            assert all(got[k] <= owed[k] for k in got), (got, owed)
        else:
            assert got == owed, (got, owed)
        await trio.testing.wait_all_tasks_blocked()
        stats = host.statistics()
        assert (stats.connections, stats.pending_requests) == (0, 0)
        async with trio.open_nursery() as nursery:
            again = LkRawClient(lk_attach(host, nursery))
            await again.send(run_input("again", "hello"))
            resp = await again.response()
            assert resp.request_id == "again" and not resp.error
            assert resp.run_input.items[-1].message.content[0].text == "Hi there!"
            nursery.cancel_scope.cancel()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frames, _endings)
def test_the_lk_request_loop_survives_anything(frames: list[bytes], ending: str) -> None:
    event(f"ending: {ending}")
    trio.run(_play, frames, ending, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_flood_of_pings_is_answered_in_order(autojump_clock) -> None:
    async with lk_hosted() as host, trio.open_nursery() as nursery:
        raw = LkRawClient(lk_attach(host, nursery))
        await raw.send(b"".join(encode_message(ping(f"p{i}")) for i in range(2000)))
        ids = [(await raw.response()).request_id for _ in range(2000)]
        assert ids == [f"p{i}" for i in range(2000)]
        nursery.cancel_scope.cancel()


# -- the client's side: a hostile host ---------------------------------------------------------

_host_messages = st.lists(st.one_of(
    _garbage,
    _not_for_a_host,
    st.builds(lambda rid, err: encode_message(pb.AgentSessionMessage(response=pb.SessionResponse(
        request_id=rid, error=err, pong=pb.SessionResponse.Pong()))),
        st.sampled_from(["req_trio_1", "nobody", ""]), st.sampled_from(["", "no"])),
), max_size=20)


async def _hostile(messages: list[bytes], ending: str) -> None:
    from agents_trio.remote import lk
    from agents_trio.remote.errors import RemoteSessionError

    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        async def host_side() -> None:
            await server.receive_some(65536)  # the first request
            await server.send_all(b"".join(messages))
            if ending == "oversized":
                await server.send_all((1 << 30).to_bytes(4, "big"))
            elif ending == "truncated":
                await server.send_all(b"\x00\x00\x00\x09abc")
            await server.aclose()

        nursery.start_soon(host_side)
        async with lk.open_remote_session(client, max_events=4) as remote:
            try:
                await remote.ping(timeout=5)
            except (RemoteSessionError, TimeoutError):
                pass  # an answer, an error, a closed connection or silence: all clean
            with pytest.raises((RemoteSessionError, TimeoutError)):
                await remote.ping(timeout=5)  # the host is gone by now
        nursery.cancel_scope.cancel()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_host_messages, st.sampled_from(["clean", "oversized", "truncated"]))
def test_the_client_survives_a_hostile_host(messages: list[bytes], ending: str) -> None:
    trio.run(_hostile, messages, ending, clock=trio.testing.MockClock(autojump_threshold=0))
