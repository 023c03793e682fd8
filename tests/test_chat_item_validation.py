"""Chat items check what they are built with, as LiveKit's pydantic models do: a message
whose content is a bare string, a number, or that has an unknown role, fails where it is made.

Before, ``ChatMessage(role="user", content="hi")`` was taken and read back as ``"h\\ni"``
(each character a content part), and a message with ``content=[5]`` or a call output that
is not a string was stored in the agent's context, where every later LLM request had to
format it (and would fail on each turn, not once).
"""

from __future__ import annotations

import pytest

from agents_trio import ChatContext, ChatMessage, FunctionCall, FunctionCallOutput
from agents_trio.chat import AudioContent, ImageContent


@pytest.mark.parametrize("content, error", [
    ("hi", TypeError),            # a bare string: LiveKit's content is a list
    (5, TypeError),
    ([5], TypeError),
    (["ok", None], TypeError),
    ([{"text": "hi"}], TypeError),
])
def test_a_message_with_bad_content_fails_where_it_is_made(content, error):
    with pytest.raises(error, match="content"):
        ChatMessage(role="user", content=content)


@pytest.mark.parametrize("role", ["bogus", "User", "", None])
def test_a_message_with_an_unknown_role_fails_where_it_is_made(role):
    with pytest.raises(ValueError, match="role"):
        ChatMessage(role=role, content=["hi"])
    with pytest.raises(ValueError, match="role"):
        ChatContext().add_message(role=role, content="hi")


def test_add_message_still_takes_a_string_and_a_list():
    ctx = ChatContext()
    assert ctx.add_message(role="user", content="hi").content == ["hi"]
    image = ImageContent(image="https://example.com/a.png")
    audio = AudioContent(frame=[], transcript="hello")
    assert ctx.add_message(role="assistant", content=["a", image, audio]).content == [
        "a", image, audio]
    with pytest.raises(TypeError, match="content"):
        ctx.add_message(role="user", content=5)


@pytest.mark.parametrize("kwargs", [
    dict(call_id=1, name="f", arguments="{}"),
    dict(call_id="c", name=None, arguments="{}"),
    dict(call_id="c", name="f", arguments={"a": 1}),   # arguments are a JSON string
])
def test_a_function_call_with_a_non_string_field_fails(kwargs):
    with pytest.raises(TypeError):
        FunctionCall(**kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(call_id="c", name="f", output={"ok": True}),
    dict(call_id="c", name="f", output=None),
    dict(call_id=None, name="f", output="ok"),
    dict(call_id="c", name="f", output="ok", is_error="no"),
])
def test_a_function_call_output_with_a_bad_field_fails(kwargs):
    with pytest.raises(TypeError):
        FunctionCallOutput(**kwargs)
