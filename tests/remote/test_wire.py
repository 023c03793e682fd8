"""The remote-session wire protocol: messages, chat-item mirrors, errors, framing, fuzzing."""

from __future__ import annotations

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio.chat import (AgentConfigUpdate, AgentHandoff, ChatMessage, FunctionCall,
                              FunctionCallOutput)
from agents_trio.events import (AgentFalseInterruptionEvent, AgentStateChangedEvent, CloseEvent,
                                ConversationItemAddedEvent, ErrorEvent,
                                FunctionToolsExecutedEvent, LLMMetrics, MetricsCollectedEvent,
                                SpeechCreatedEvent, UserInputTranscribedEvent,
                                UserStateChangedEvent)
from agents_trio.remote import wire
from agents_trio.remote import wire_payloads as wp
from agents_trio.remote._events import event_from_wire

ALL_MESSAGES = [
    wire.WaitForReady(id=1), wire.Run(id=2, text="hi"), wire.GetChatHistory(id=3),
    wire.GetAgentInfo(id=4), wire.GetSessionState(id=5), wire.Subscribe(id=6, events=["error"]),
    wire.Unsubscribe(id=7), wire.Cancel(id=8),
    wire.ReadyReply(id=1, agent_id="a"),
    wire.RunReply(id=2, items=[wire.to_wire_item(ChatMessage(role="assistant", content=["x"]))]),
    wire.HistoryReply(id=3, items=[]),
    wire.AgentInfoReply(id=4, agent=wire.AgentInfo(id="a", label="A", instructions="i",
                                                   tools=[wire.ToolInfo(name="t")])),
    wire.SessionStateReply(id=5, state=wire.SessionStateInfo(
        agent_state="listening", user_state="listening", current_speech=wire.SpeechInfo(
            id="s", source="say", allow_interruptions=True, interrupted=False, done=False))),
    wire.SubscribedReply(id=6, events=None), wire.UnsubscribedReply(id=7),
    wire.ErrorReply(id=None, code="malformed_message", message="bad"),
    wire.Event(event=wp.AgentStateChanged(old_state="listening", new_state="thinking")),
    wire.Goodbye(code="session_closed", message="bye"),
]


def _payload(message: wire.Message) -> bytes:
    return wire.encode_frame(message)[wire.HEADER_SIZE:]


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=lambda m: m.kind)
def test_every_message_round_trips_through_its_decoder(message: wire.Message) -> None:
    decode = wire.decode_request if isinstance(message, wire.Request) else wire.decode_reply
    assert decode(_payload(message)) == message
    assert msgspec.msgpack.decode(_payload(message))["v"] == wire.PROTOCOL_VERSION


@pytest.mark.parametrize("kind", sorted(wp.ITEM_PAIRS))
def test_wire_items_mirror_the_chat_items_field_for_field(kind: str) -> None:
    chat_cls, wire_cls = wp.ITEM_PAIRS[kind]
    assert set(chat_cls.__struct_fields__) - {"type"} == set(wire_cls.__struct_fields__)


def test_chat_items_survive_the_wire() -> None:
    items = [ChatMessage(role="assistant", content=["a", "b"], interrupted=True,
                         metrics={"ttft": 0.1}),
             FunctionCall(call_id="c", name="f", arguments='{"x": 1}'),
             FunctionCallOutput(call_id="c", name="f", output="o", is_error=True),
             AgentHandoff(old_agent_id="a", new_agent_id="b"),
             AgentConfigUpdate(instructions="i", tools_added=["f"])]
    reply = wire.decode_reply(_payload(wire.HistoryReply(
        id=1, items=[wire.to_wire_item(i) for i in items])))
    assert [wire.from_wire_item(i) for i in reply.items] == items


@pytest.mark.parametrize(("payload", "error", "request_id"), [
    (b"", wire.MalformedMessageError, None),
    (b"\xc1", wire.MalformedMessageError, None),
    (msgspec.msgpack.encode([1, 2]), wire.MalformedMessageError, None),
    (msgspec.msgpack.encode({"kind": "run", "v": 1, "id": 5}), wire.MalformedMessageError, 5),
    (msgspec.msgpack.encode({"kind": "run", "v": 1, "id": 5, "text": 3}),
     wire.MalformedMessageError, 5),
    (msgspec.msgpack.encode({"kind": "dance", "v": 1, "id": 6}), wire.UnknownMessageTypeError,
     6),
    (msgspec.msgpack.encode({"kind": "ready", "v": 1, "id": 7, "agent_id": "a"}),
     wire.UnknownMessageTypeError, 7),
    (msgspec.msgpack.encode({"kind": "run", "v": 2, "id": 8, "text": "x"}),
     wire.ProtocolVersionError, 8),
    (msgspec.msgpack.encode({"kind": "future", "v": 9, "id": 9}), wire.ProtocolVersionError, 9),
])
def test_bad_payloads_raise_a_wire_error_naming_the_request(payload: bytes, error: type,
                                                             request_id: int | None) -> None:
    with pytest.raises(error) as info:
        wire.decode_request(payload)
    assert info.value.request_id == request_id
    assert info.value.code in str(wire.ErrorCode)


def test_version_error_says_both_versions() -> None:
    payload = msgspec.msgpack.encode({"kind": "run", "v": 2, "id": 8, "text": "x"})
    with pytest.raises(wire.ProtocolVersionError,
                       match=r"unsupported protocol version 2 \(this side speaks 1\)"):
        wire.decode_request(payload)


def test_frame_decoder_reassembles_frames_split_at_every_byte() -> None:
    frames = b"".join(wire.encode_frame(m) for m in ALL_MESSAGES[:5])
    decoder = wire.FrameDecoder()
    out = []
    for i in range(len(frames)):
        decoder.feed(frames[i:i + 1])
        while (payload := decoder.next_frame()) is not None:
            out.append(wire.decode_request(payload))
    assert out == ALL_MESSAGES[:5]
    assert decoder.buffered == 0


def test_a_frame_over_the_limit_is_refused_from_its_header() -> None:
    decoder = wire.FrameDecoder(max_frame_size=16)
    decoder.feed((1 << 31).to_bytes(4, "big"))
    with pytest.raises(wire.FrameTooLargeError, match="2147483648 bytes exceeds the limit of 16"):
        decoder.next_frame()


async def test_frame_reader_reports_truncation_and_clean_end() -> None:
    send, recv = trio.testing.memory_stream_one_way_pair()
    reader = wire.FrameReader(recv)
    frame = wire.encode_frame(wire.GetChatHistory(id=1))
    await send.send_all(frame + frame[:5])
    await send.aclose()
    assert wire.decode_request(await reader.receive()) == wire.GetChatHistory(id=1)
    with pytest.raises(wire.TruncatedFrameError, match="middle of a frame"):
        await reader.receive()
    send2, recv2 = trio.testing.memory_stream_one_way_pair()
    await send2.aclose()
    assert await wire.FrameReader(recv2).receive() is None


def test_every_session_event_has_a_wire_form_and_comes_back() -> None:
    msg = ChatMessage(role="assistant", content=["hi"])
    call = FunctionCall(call_id="c", name="f")
    out = FunctionCallOutput(call_id="c", name="f", output="o")

    class Handle:
        id = "speech_1"

    events = [
        AgentStateChangedEvent(old_state="listening", new_state="thinking"),
        UserStateChangedEvent(old_state="listening", new_state="speaking"),
        UserInputTranscribedEvent(transcript="hi", is_final=True, language="en"),
        ConversationItemAddedEvent(item=msg),
        FunctionToolsExecutedEvent(function_calls=[call], function_call_outputs=[out, None]),
        MetricsCollectedEvent(metrics=LLMMetrics(ttft=0.25, request_id="r")),
        SpeechCreatedEvent(speech_handle=Handle(), source="say"),
        AgentFalseInterruptionEvent(resumed=True),
        ErrorEvent(error=ValueError("boom"), source=object()),
        CloseEvent(reason="error", error=RuntimeError("down")),
    ]
    for event in events:
        frame = wire.decode_reply(_payload(wire.Event(event=wire.event_to_wire(event))))
        name, back = event_from_wire(frame.event)
        assert name == event.type == back.type
    assert event_from_wire(wire.event_to_wire(events[3]))[1].item == msg
    assert event_from_wire(wire.event_to_wire(events[5]))[1].metrics.ttft == 0.25
    assert event_from_wire(wire.event_to_wire(events[6]))[1].speech_handle == "speech_1"
    error = event_from_wire(wire.event_to_wire(events[8]))[1]
    assert (error.error.message, error.error.error_type, error.source) == ("boom", "ValueError",
                                                                           "object")


def test_an_unknown_event_travels_as_other_event() -> None:
    class Custom(msgspec.Struct):
        value: int
        thing: object = None
        type: str = "custom_event"
        created_at: float = 1.5

    wire_event = wire.event_to_wire(Custom(value=3, thing=object()))
    assert isinstance(wire_event, wp.OtherEvent)
    assert (wire_event.name, wire_event.created_at, wire_event.data["value"]) == (
        "custom_event", 1.5, 3)
    assert wire.decode_reply(_payload(wire.Event(event=wire_event))).event == wire_event


# -- fuzzing ----------------------------------------------------------------------------------

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.floats(),
                  st.text(max_size=20), st.binary(max_size=20))
_values = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
_kinds = st.sampled_from(["run", "wait_for_ready", "get_chat_history", "get_agent_info",
                          "get_session_state", "subscribe", "unsubscribe", "cancel", "ready",
                          "error", "event", "nope", ""])
_messages = st.fixed_dictionaries(
    {"kind": st.one_of(_kinds, _values)},
    optional={"v": st.one_of(st.just(1), _values), "id": st.one_of(st.integers(0, 100), _values),
              "text": _values, "events": _values})


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_decoding_arbitrary_bytes_raises_only_wire_errors(data: bytes) -> None:
    for decode in (wire.decode_request, wire.decode_reply):
        try:
            decode(data)
        except wire.WireError as e:
            assert e.request_id is None or isinstance(e.request_id, int)


@settings(max_examples=200, deadline=None)
@given(_messages)
def test_decoding_arbitrary_messages_gives_a_request_or_a_wire_error(message: dict) -> None:
    payload = msgspec.msgpack.encode(message)
    try:
        decoded = wire.decode_request(payload)
    except wire.WireError as e:
        if e.request_id is not None:
            assert e.request_id == message.get("id")
    else:
        assert isinstance(decoded, wire.Request)
        assert decoded.v == wire.PROTOCOL_VERSION and decoded.kind == message["kind"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(ALL_MESSAGES[:8]), max_size=8),
       st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_frames_survive_any_chunking(messages: list, cuts: list[int]) -> None:
    data = b"".join(wire.encode_frame(m) for m in messages)
    decoder = wire.FrameDecoder()
    out, position, i = [], 0, 0
    while position < len(data):
        size = cuts[i % len(cuts)]
        decoder.feed(data[position:position + size])
        position, i = position + size, i + 1
        while (payload := decoder.next_frame()) is not None:
            out.append(wire.decode_request(payload))
    assert out == messages and decoder.buffered == 0
