"""``ChatContext`` against LiveKit's: ``copy``'s filters, ``truncate``, ``remove``, the dict
form both ways (LiveKit's ``to_dict`` loads here and ours loads in LiveKit), and
``to_provider_format`` writing what LiveKit's formatter writes."""

from __future__ import annotations

from typing import Any

import pytest

from agents_trio.llm import (AgentConfigUpdate, AgentHandoff, AudioContent, ChatContext,
                             ChatMessage, FunctionCall, FunctionCallOutput, ImageContent,
                             function_tool)

lk_llm = pytest.importorskip("livekit.agents.llm")


def _items(lib: Any) -> list[Any]:
    """The same conversation built with either library's item classes."""
    return [
        lib.ChatMessage(id="sys", role="system", content=["be brief"], created_at=1.0),
        lib.AgentHandoff(id="h1", new_agent_id="a1", created_at=1.5),
        lib.ChatMessage(id="u1", role="user", content=["weather?"], created_at=2.0,
                        extra={"k": 1}, metrics={"transcription_delay": 0.25}),
        lib.ChatMessage(id="m1", role="assistant", content=["checking"], created_at=3.0),
        lib.FunctionCall(id="m1/fnc_0", call_id="c1", name="weather", arguments='{"a":1}',
                         created_at=3.1, extra={"google": {"sig": "x"}}),
        lib.FunctionCall(id="m1/fnc_1", call_id="c2", name="time", arguments="{}",
                         created_at=3.2, group_id="g"),
        lib.FunctionCallOutput(id="o1", call_id="c1", name="weather", output="sunny",
                               is_error=False, created_at=3.5),
        lib.FunctionCallOutput(id="o2", call_id="c2", name="", output="noon",
                               is_error=False, created_at=3.6),
        lib.ChatMessage(id="empty", role="assistant", content=[], created_at=3.7),
        lib.AgentConfigUpdate(id="cfg", instructions="new", tools_added=["x"], created_at=3.8),
        lib.ChatMessage(id="dev", role="developer", content=["later"], created_at=3.9),
        lib.ChatMessage(id="a2", role="assistant", content=["sunny", "at noon"],
                        created_at=4.0, interrupted=True),
    ]


def _pair() -> tuple[ChatContext, Any]:
    return ChatContext(_items(__import__("agents_trio.llm").llm)), lk_llm.ChatContext(
        _items(lk_llm))


def _lk_dict(ctx: Any, **kwargs: Any) -> dict[str, Any]:
    """LiveKit's dict without ``reply_required``, the one field not carried here (a tool's
    output always asks for a reply on this runtime)."""
    data = ctx.to_dict(**kwargs)
    for item in data["items"]:
        item.pop("reply_required", None)
    return data  # type: ignore[no-any-return]


def _ids(ctx: Any) -> list[str]:
    return [i.id for i in ctx.items]


@pytest.mark.parametrize("kwargs", [
    {}, {"exclude_function_call": True}, {"exclude_instructions": True},
    {"exclude_empty_message": True}, {"exclude_handoff": True},
    {"exclude_config_update": True}, {"tools": ["weather"]}, {"tools": []},
    {"exclude_instructions": True, "exclude_empty_message": True, "exclude_handoff": True,
     "exclude_config_update": True, "tools": ["time"]},
])
def test_copy_keeps_what_livekits_copy_keeps(kwargs: dict[str, Any]) -> None:
    ours, theirs = _pair()
    assert _ids(ours.copy(**kwargs)) == _ids(theirs.copy(**kwargs))


def test_copy_takes_tools_by_object() -> None:
    @function_tool
    async def weather() -> str:
        """Weather."""
        return "sunny"

    ours, _ = _pair()
    kept = _ids(ours.copy(tools=[weather]))
    assert "m1/fnc_0" in kept and "o1" in kept
    assert "m1/fnc_1" not in kept and "o2" not in kept


@pytest.mark.parametrize("max_items", [0, 1, 3, 5, 6, 8, 12, 20])
def test_truncate_keeps_what_livekits_truncate_keeps(max_items: int) -> None:
    ours, theirs = _pair()
    assert ours.truncate(max_items=max_items) is ours
    theirs.truncate(max_items=max_items)
    assert _ids(ours) == _ids(theirs)


def test_truncate_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="max_items"):
        ChatContext().truncate(max_items=-1)


def test_remove_by_item_or_id() -> None:
    ours, _ = _pair()
    ours.remove("u1")
    first = ours.items[0]
    ours.remove(first)
    assert "u1" not in _ids(ours) and first.id not in _ids(ours)
    with pytest.raises(ValueError):
        ours.remove("u1")


def test_the_readonly_context_refuses_remove_and_truncate() -> None:
    from agents_trio.chat import ReadOnlyChatContext
    ro = ReadOnlyChatContext([ChatMessage(role="user", content=["x"])])
    assert ro.readonly and not ChatContext().readonly
    with pytest.raises(RuntimeError):
        ro.remove(ro.items[0])
    with pytest.raises(RuntimeError):
        ro.truncate(max_items=0)


@pytest.mark.parametrize("kwargs", [
    {}, {"exclude_timestamp": False}, {"exclude_function_call": True},
    {"exclude_metrics": True}, {"exclude_config_update": True},
])
def test_to_dict_writes_livekits_dict(kwargs: dict[str, Any]) -> None:
    ours, theirs = _pair()
    assert ours.to_dict(**kwargs) == _lk_dict(theirs, **kwargs)


def test_livekits_dict_loads_here_and_ours_loads_in_livekit() -> None:
    ours, theirs = _pair()
    loaded = ChatContext.from_dict(theirs.to_dict(exclude_timestamp=False))
    assert loaded.to_dict(exclude_timestamp=False) == _lk_dict(theirs, exclude_timestamp=False)
    assert isinstance(loaded.items[4], FunctionCall) and loaded.items[4].extra == {
        "google": {"sig": "x"}}
    back = lk_llm.ChatContext.from_dict(ours.to_dict(exclude_timestamp=False))
    assert _lk_dict(back, exclude_timestamp=False) == ours.to_dict(exclude_timestamp=False)
    assert [type(i).__name__ for i in back.items] == [type(i).__name__ for i in ours.items]


def test_images_survive_the_dict_when_asked_for() -> None:
    ctx = ChatContext()
    ctx.add_message(role="user", content=[
        "look", ImageContent(id="img1", image="https://x.test/a.png", inference_width=64)])
    lk_ctx = lk_llm.ChatContext.from_dict(ctx.to_dict(exclude_image=False))
    assert lk_ctx.to_dict(exclude_image=False) == ctx.to_dict(exclude_image=False)
    assert ctx.to_dict()["items"][0]["content"] == ["look"]
    again = ChatContext.from_dict(lk_ctx.to_dict(exclude_image=False))
    image = again.messages()[0].content[1]
    assert isinstance(image, ImageContent) and image.inference_width == 64


def test_audio_content_is_left_out_by_default_and_refused_as_json() -> None:
    ctx = ChatContext()
    ctx.add_message(role="user", content=[AudioContent(frame=[], transcript="hi"), "hi"])
    assert ctx.to_dict()["items"][0]["content"] == ["hi"]
    with pytest.raises(ValueError, match="exclude_audio"):
        ctx.to_dict(exclude_audio=False)


def test_from_dict_names_a_malformed_item() -> None:
    with pytest.raises(ValueError, match="not a chat item"):
        ChatContext.from_dict({"items": [{"type": "bogus"}]})
    with pytest.raises(ValueError, match="malformed chat item"):
        ChatContext.from_dict({"items": [{"type": "function_call", "name": "f"}]})


def test_openai_format_is_livekits() -> None:
    ours, theirs = _pair()
    ours.add_message(role="user", created_at=4.5, content=[
        "see", ImageContent(id="i", image="https://x.test/a.png", inference_detail="low")])
    theirs.add_message(role="user", created_at=4.5, content=[
        "see", lk_llm.ImageContent(id="i", image="https://x.test/a.png",
                                   inference_detail="low")])
    # an output whose call is gone and a call without output are both left out
    for lib, ctx in ((__import__("agents_trio.llm").llm, ours), (lk_llm, theirs)):
        ctx.insert(lib.FunctionCallOutput(id="stray", call_id="nope", name="x", output="?",
                                          is_error=False, created_at=5.0))
        ctx.insert(lib.FunctionCall(id="lone", call_id="lone", name="x", arguments="{}",
                                    created_at=5.1))
    assert ours.to_provider_format("openai") == theirs.to_provider_format("openai")


@pytest.mark.parametrize("fmt", ["anthropic", "google", "openai.responses"])
def test_other_formats_are_livekits(fmt: str) -> None:
    ours, theirs = _pair()
    mine, _ = ours.to_provider_format(fmt)
    expected, _ = theirs.to_provider_format(fmt)
    assert mine == expected


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown provider format"):
        ChatContext().to_provider_format("carrier-pigeon")


def test_messages_and_calls_carry_livekits_extra_fields() -> None:
    ctx = ChatContext()
    msg = ctx.add_message(role="user", content="x", extra={"a": 1}, metrics={"e2e_latency": 1.0})
    assert msg.extra == {"a": 1} and msg.metrics == {"e2e_latency": 1.0} and msg.hash is None
    call = FunctionCall(call_id="c", name="f", group_id="g", extra={"k": "v"})
    assert (call.group_id, call.extra) == ("g", {"k": "v"})
    assert isinstance(AgentHandoff(new_agent_id="a"), AgentHandoff)
    assert AgentConfigUpdate().type == "agent_config_update"
    assert FunctionCallOutput(call_id="c", name="f", output="o").is_error is False
