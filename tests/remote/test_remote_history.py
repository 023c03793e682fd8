"""``get_chat_history`` under a history larger than one reply: it always answers (the most
recent items that fit, saying so), pages on request, and the client fetches the whole history
page by page. An item larger than a reply is sent shortened and flagged, never as an error."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_trio import AgentSession
from agents_trio.remote import wire
from agents_trio.testing import FakeActions, FakeLLM
from remote_helpers import RawClient, attach, client_of, frame_of, hosted

BIG = 300_000


def _big(i: int) -> str:
    return f"turn {i}: " + "x" * BIG


def _big_turns_session(turns: int) -> AgentSession:
    """A session whose user turns are large texts, each answered briefly."""
    actions = FakeActions()
    for i in range(turns):
        actions.add_llm(f"noted {i}", input=_big(i), ttft=0.0, duration=0.0)
    return AgentSession(llm=FakeLLM(actions.llm_responses))


def _ids(items: Any) -> list[str]:
    return [item.id for item in items]


async def _ask(raw: RawClient, request: wire.Message) -> Any:
    await raw.send(request)
    return await raw.receive()


async def test_a_history_over_the_frame_limit_is_fetched_whole(autojump_clock) -> None:
    """The issue's failure: after a few large turns the history passed 1 MiB and every
    ``get_chat_history`` failed with ``response_too_large``."""
    session = _big_turns_session(4)
    async with hosted(session) as host, client_of(host) as remote:
        for i in range(4):
            await remote.run(_big(i))
        size = sum(len(msgspec.msgpack.encode(wire.to_wire_item(item)))
                   for item in session.history.items)
        assert size > wire.DEFAULT_MAX_FRAME_SIZE
        history = await remote.get_chat_history()
        assert _ids(history.items) == _ids(session.history.items)
        assert [i.text_content for i in history.items if i.type == "message"] == [
            i.text_content for i in session.history.items if i.type == "message"]
        assert host.statistics().errors_sent == 0


async def test_the_default_request_answers_the_most_recent_items_that_fit(
        autojump_clock) -> None:
    session = _big_turns_session(4)
    async with hosted(session) as host, client_of(host) as remote, \
            trio.open_nursery() as nursery:
        for i in range(4):
            await remote.run(_big(i))
        raw = RawClient(attach(host, nursery))
        await raw.send(wire.GetChatHistory(id=1))  # as a client of before paging asks
        payload = await raw.reader.receive()
        assert payload is not None and len(payload) <= wire.DEFAULT_MAX_FRAME_SIZE
        reply = wire.decode_reply(payload)
        assert isinstance(reply, wire.HistoryReply), reply
        everything = _ids(session.history.items)
        assert reply.total == len(everything) and reply.end == len(everything)
        assert 0 < reply.start < reply.end  # earlier items were left out, and it says so
        assert reply.more is False and reply.truncated == []
        assert _ids(reply.items) == everything[reply.start:]
        await raw.stream.aclose()


async def test_pages_cover_the_history_once_and_in_order(autojump_clock) -> None:
    session = _big_turns_session(4)
    async with hosted(session) as host, client_of(host) as remote:
        for i in range(4):
            await remote.run(_big(i))
        first = await remote.get_chat_history_page(start=0, limit=2)
        assert (first.start, first.end, first.more) == (0, 2, True)
        assert _ids(first.items) == _ids(session.history.items[:2])
        walked: list[str] = []
        start, pages = 0, 0
        while True:
            page = await remote.get_chat_history_page(start=start)
            assert page.start == start and page.end > start
            walked += _ids(page.items)
            pages += 1
            if not page.more:
                break
            start = page.end
        assert walked == _ids(session.history.items)
        assert pages >= 2
        tail = await remote.get_chat_history_page()
        assert tail.end == tail.total == len(session.history.items) and not tail.more
        past = await remote.get_chat_history_page(start=10_000)
        assert (past.items, past.start, past.end, past.more) == ([], 10_000, 10_000, False)
        assert (await remote.get_chat_history_page(start=1, limit=0)).items == []


async def test_an_item_larger_than_a_reply_is_shortened_and_flagged(autojump_clock) -> None:
    async with hosted(max_frame_size=4096) as host, client_of(host) as remote:
        await remote.run("hello")
        session = host._session  # noqa: SLF001 - the test's own session
        huge = session.history.add_message(role="assistant", content="y" * 20_000)
        await remote.run("hello")
        page = await remote.get_chat_history_page(start=0)
        history = await remote.get_chat_history()
        assert _ids(history.items) == _ids(session.history.items)
        shortened = next(i for i in history.items if i.id == huge.id)
        assert shortened.text_content.startswith("y" * 1000)
        assert "truncated" in shortened.text_content
        assert len(shortened.text_content) < 4096
        pages = [page]
        while pages[-1].more:
            pages.append(await remote.get_chat_history_page(start=pages[-1].end))
        assert [p.truncated for p in pages if p.truncated] == [(huge.id,)]
        assert host.statistics().errors_sent == 0


async def test_a_reply_over_a_small_limit_is_paged(autojump_clock) -> None:
    async with hosted(max_frame_size=600) as host, client_of(host) as remote:
        for _ in range(6):
            await remote.run("hello")
        history = await remote.get_chat_history()
        assert _ids(history.items) == _ids(host._session.history.items)  # noqa: SLF001
        assert (await remote.get_session_state()).ready


# -- malformed paging parameters --------------------------------------------------------------

_values = st.one_of(st.none(), st.integers(-3, 5), st.integers(2**62, 2**64 - 1),
                    st.integers(-2**63, -1), st.floats(allow_nan=False, width=32),
                    st.text(max_size=4), st.booleans(), st.lists(st.integers(0, 3), max_size=2),
                    st.dictionaries(st.text(max_size=2), st.integers(0, 2), max_size=1))


def _valid(value: Any) -> bool:
    return value is None or (type(value) is int and value >= 0)


async def _play_paging(cases: list[tuple[Any, Any]]) -> None:
    async with hosted(max_frame_size=2048) as host, client_of(host) as remote, \
            trio.open_nursery() as nursery:
        for _ in range(3):
            await remote.run("hello")
        raw = RawClient(attach(host, nursery))
        for n, (start, limit) in enumerate(cases):
            fields: dict[str, Any] = {"kind": "get_chat_history", "v": 1, "id": n}
            if start != "absent":
                fields["start"] = start
            if limit != "absent":
                fields["limit"] = limit
            await raw.send(frame_of(msgspec.msgpack.encode(fields)))
            reply = await raw.receive()
            assert reply is not None and reply.id == n
            ok = _valid(None if start == "absent" else start) and \
                _valid(None if limit == "absent" else limit)
            if ok:
                assert reply.kind == "history", reply
                assert reply.end - reply.start <= (limit if type(limit) is int else 10**9)
            else:
                assert reply.kind == "error", reply
                assert reply.code == "malformed_message"
                assert "start" in reply.message or "limit" in reply.message, reply.message
            state = await _ask(raw, wire.GetSessionState(id=10_000 + n))
            assert state.kind == "session_state"
        assert (await remote.get_chat_history()).items
        await raw.stream.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert host.statistics().connections == 1


_param = st.one_of(st.just("absent"), _values)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_param, _param), min_size=1, max_size=8))
def test_malformed_paging_parameters_get_a_clear_error(cases: list[tuple[Any, Any]]) -> None:
    trio.run(_play_paging, cases, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize(("fields", "text"), [
    ({"start": -1}, "$.start"), ({"limit": -5}, "$.limit"), ({"start": "0"}, "$.start"),
    ({"limit": 1.5}, "$.limit"), ({"start": True}, "$.start"),
])
async def test_a_bad_paging_parameter_is_named_in_the_error(
        fields: dict[str, Any], text: str, autojump_clock) -> None:
    async with hosted() as host, trio.open_nursery() as nursery:
        raw = RawClient(attach(host, nursery))
        await raw.send(frame_of(msgspec.msgpack.encode(
            {"kind": "get_chat_history", "v": 1, "id": 3, **fields})))
        error = await raw.receive()
        assert (error.kind, error.id, error.code) == ("error", 3, "malformed_message")
        assert text in error.message
        reply = await _ask(raw, wire.GetChatHistory(id=4))
        assert reply.kind == "history"
        await raw.stream.aclose()


def test_a_history_reply_of_an_older_host_still_decodes() -> None:
    old = msgspec.msgpack.encode({"kind": "history", "v": 1, "id": 1, "items": []})
    reply = wire.decode_reply(old)
    assert isinstance(reply, wire.HistoryReply)
    assert (reply.total, reply.more, reply.truncated) == (None, False, [])


# -- pages fit, whatever the items ------------------------------------------------------------

_texts = st.text(alphabet=st.sampled_from("ab é€😀"), max_size=3000)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.lists(_texts, min_size=1,
                                                                          max_size=3)),
                max_size=12),
       st.integers(512, 6000), st.one_of(st.none(), st.integers(0, 14)),
       st.one_of(st.none(), st.integers(0, 5)))
def test_a_history_page_always_fits_and_covers_its_range(
        messages: list[tuple[str, list[str]]], max_frame_size: int, start: int | None,
        limit: int | None) -> None:
    from agents_trio import ChatContext
    from agents_trio.remote._history import history_page

    history = ChatContext()
    for role, content in messages:
        history.add_message(role=role, content=content)  # type: ignore[arg-type]
    items = history.items
    reply = history_page(items, wire.GetChatHistory(id=2**40, start=start, limit=limit),
                         max_frame_size)
    assert len(wire.encode_frame(reply)) - wire.HEADER_SIZE <= max_frame_size
    assert reply.total == len(items) and reply.more == (reply.end < len(items))
    if start is not None:
        assert reply.start == start
    else:
        assert reply.end == len(items)
    wanted = len(items) if limit is None else limit
    covered = reply.end - reply.start
    assert covered <= wanted
    if wanted and reply.start < len(items):
        assert covered >= 1  # a walk always moves on
    assert _ids(reply.items) == _ids(items[reply.start:reply.end])
    for sent, item in zip(reply.items, items[reply.start:reply.end]):
        if sent.id in reply.truncated:
            assert sent.content != item.content
        else:
            assert sent.content == [c for c in item.content]
    assert len(reply.truncated) <= 1


# -- the client's walk, against a scripted host -----------------------------------------------

def _message(n: int) -> wire.MessageItem:
    return wire.MessageItem(id=f"m{n}", role="user", content=[f"text {n}"])


async def _scripted_host(stream: trio.abc.Stream, pages: list[dict[str, Any]],
                         asked: list[tuple[Any, Any]]) -> None:
    """Answers each history request with the next scripted page."""
    reader = wire.FrameReader(stream)
    for page in pages:
        payload = await reader.receive()
        assert payload is not None
        request = wire.decode_request(payload)
        asked.append((request.start, request.limit))
        await stream.send_all(wire.encode_frame(wire.HistoryReply(id=request.id, **page)))


async def test_the_whole_history_walk_starts_over_when_the_history_changed(
        autojump_clock) -> None:
    from agents_trio import open_remote_session

    m = [_message(n) for n in range(4)]
    pages = [
        {"items": m[0:2], "start": 0, "end": 2, "total": 3, "more": True},
        # an item was inserted before index 2 meanwhile: the walk starts over
        {"items": m[2:4], "start": 2, "end": 4, "total": 4, "more": False},
        {"items": m[0:3], "start": 0, "end": 3, "total": 4, "more": True},
        {"items": m[3:4], "start": 3, "end": 4, "total": 4, "more": False},
    ]
    client_stream, host_stream = trio.testing.memory_stream_pair()
    asked: list[tuple[Any, Any]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_scripted_host, host_stream, pages, asked)
        async with open_remote_session(client_stream) as remote:
            history = await remote.get_chat_history()
            with pytest.raises(ValueError, match="start must be >= 0"):
                await remote.get_chat_history_page(start=-1)
    assert [i.id for i in history.items] == ["m0", "m1", "m2", "m3"]
    assert asked == [(0, None), (2, None), (0, None), (3, None)]


async def test_the_client_reads_a_host_of_before_paging(autojump_clock) -> None:
    from agents_trio import open_remote_session

    client_stream, host_stream = trio.testing.memory_stream_pair()
    old_reply = {"items": [_message(0), _message(1)]}  # no start, end, total
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_scripted_host, host_stream, [old_reply, old_reply], [])
        async with open_remote_session(client_stream) as remote:
            assert [i.id for i in (await remote.get_chat_history()).items] == ["m0", "m1"]
            page = await remote.get_chat_history_page(start=0)
    assert (page.start, page.end, page.total, page.more) == (0, 2, 2, False)
