"""Hypothesis against the host's request loop: random mixes of valid requests, garbage frames,
wrong versions, unknown kinds, cancels and duplicate ids, ended cleanly, by a truncated or an
oversized frame, or by the client vanishing.

Whatever is drawn: no exception escapes the host; every reply is well-formed and answers an id
that was sent; each garbage frame gets its error; no request is answered twice; the host ends
with no connection, pending request or queued turn; and another client can still run a turn.

``@given`` cannot wrap an async test under pytest-trio, so each example runs with ``trio.run``
on a ``MockClock(autojump_threshold=0)``.
"""

from __future__ import annotations

import collections
from typing import Any

import msgspec
import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agents_trio.remote import wire
from remote_helpers import RawClient, attach, client_of, frame_of, hosted

SENTINEL = 10_000
TEXTS = ["hello", "weather in Paris?", "boom", "unscripted", ""]
_ids = st.integers(0, 6)

_requests = st.one_of(
    st.builds(wire.Run, id=_ids, text=st.sampled_from(TEXTS)),
    st.builds(wire.WaitForReady, id=_ids),
    st.builds(wire.GetChatHistory, id=_ids),
    st.builds(wire.GetAgentInfo, id=_ids),
    st.builds(wire.GetSessionState, id=_ids),
    st.builds(wire.Subscribe, id=_ids,
              events=st.one_of(st.none(), st.lists(st.sampled_from(
                  ["agent_state_changed", "conversation_item_added", "nope"]), max_size=2))),
    st.builds(wire.Unsubscribe, id=_ids),
    st.builds(wire.Cancel, id=_ids),
)
_bad_payloads = st.one_of(
    st.binary(max_size=24),
    st.builds(lambda kind, v, i: msgspec.msgpack.encode({"kind": kind, "v": v, "id": i}),
              st.sampled_from(["run", "dance", "ready", "event", ""]), st.integers(0, 3), _ids),
    st.dictionaries(st.sampled_from(["kind", "v", "id", "text"]),
                    st.one_of(st.integers(-2**63, 2**64 - 1), st.text(max_size=5), st.none()),
                    max_size=4).map(msgspec.msgpack.encode),
)
_frames = st.lists(st.one_of(_requests, _bad_payloads.map(lambda p: ("bad", p))), min_size=1,
                  max_size=30)
_endings = st.sampled_from(["clean", "truncated", "oversized", "vanish"])


async def _play(frames: list[Any], ending: str) -> None:
    async with hosted(max_pending_requests=3, max_frame_size=4096) as host:
        async with trio.open_nursery() as nursery:
            raw = RawClient(attach(host, nursery))
            data = b"".join(frame_of(f[1]) if isinstance(f, tuple) else wire.encode_frame(f)
                            for f in frames)
            await raw.send(data + wire.encode_frame(wire.GetSessionState(id=SENTINEL)))
            replies: list[Any] = []
            while True:  # replies come in order for inline requests: the sentinel is last
                message = await raw.receive()
                assert message is not None, "the host closed a healthy connection"
                replies.append(message)
                if getattr(message, "id", None) == SENTINEL:
                    break
            await trio.sleep(30)  # let every queued turn finish
            if ending == "truncated":
                await raw.send(wire.encode_frame(wire.Run(id=1, text="hello"))[:6])
                await raw.stream.send_eof()
            elif ending == "oversized":
                await raw.send(b"\x00\x01\x00\x00")
            if ending == "vanish":
                await raw.stream.aclose()
            else:
                await raw.stream.send_eof() if ending == "clean" else None
                replies += await raw.receive_all()
        _check(frames, ending, replies)
        await trio.testing.wait_all_tasks_blocked()
        stats = host.statistics()
        assert (stats.connections, stats.pending_requests, stats.queued_turns) == (0, 0, 0)
        async with client_of(host) as remote:
            assert [e.item.text_content for e in (await remote.run("hello")).events] == [
                "Hi there!"]


def _check(frames: list[Any], ending: str, replies: list[Any]) -> None:
    """Replies are well-formed; no id is answered more often than it was asked; unless the
    client vanished, every frame but the cancelled requests got its answer."""
    allowed: collections.Counter[int | None] = collections.Counter({SENTINEL: 1, None: 0})
    cancels = 0
    for frame in frames:
        if isinstance(frame, tuple):
            try:
                frame = wire.decode_request(frame[1])
            except wire.WireError as e:
                allowed[e.request_id] += 1
                continue
        if frame.kind == "cancel":
            cancels += 1
        else:
            allowed[frame.id] += 1
    if ending in ("truncated", "oversized"):
        allowed[None] += 1  # the error before the goodbye
        assert replies[-1].kind == "goodbye"
        assert replies[-1].code == {"truncated": "truncated_frame",
                                    "oversized": "frame_too_large"}[ending]
    answers: collections.Counter[int | None] = collections.Counter()
    for reply in replies:
        if reply.kind == "error":
            assert reply.code in str(wire.ErrorCode) and reply.message
        if reply.kind not in ("event", "goodbye"):
            answers[reply.id] += 1
    for request_id, count in answers.items():
        assert count <= allowed[request_id], f"id {request_id} answered {count} times"
    if ending != "vanish":
        assert sum(answers.values()) >= sum(allowed.values()) - cancels


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frames, _endings)
def test_the_request_loop_survives_anything(frames: list[Any], ending: str) -> None:
    event(f"ending: {ending}")
    event(f"frames: {min(len(frames) // 10 * 10, 20)}+")
    trio.run(_play, frames, ending, clock=trio.testing.MockClock(autojump_threshold=0))
