"""The shared confirm tool of the capture tasks: the same schema as a tool written by hand
under that name, bound to the value it was installed for."""

from __future__ import annotations

import pytest

from agents_trio.prebuilt._capture import confirm_tool
from agents_trio.tools import (build_legacy_openai_schema, build_strict_openai_schema,
                               function_tool)


@pytest.mark.parametrize(("name", "subject"), [
    ("confirm_email_address", "email address"), ("confirm_phone_number", "phone number"),
    ("confirm_address", "address"), ("confirm_name", "name"), ("confirm_dob", "date of birth")])
def test_the_schema_is_the_hand_written_tools(name: str, subject: str) -> None:
    async def by_hand() -> None:
        pass

    by_hand.__doc__ = f"Call once the user has said the {subject} is right."
    by_hand.__name__ = by_hand.__qualname__ = name
    shared = confirm_tool(name=name, subject=subject, asked=1, current=lambda: 1,
                          finish=lambda: None)
    for build in (build_legacy_openai_schema, build_strict_openai_schema):
        assert build(shared) == build(function_tool(by_hand))


async def test_a_confirmation_of_a_replaced_value_says_so() -> None:
    current = {"value": "a"}
    finished: list[str] = []

    def finish() -> None:
        finished.append(current["value"])

    tool = confirm_tool(name="confirm_x", subject="x", asked="a",
                        current=lambda: current["value"], finish=finish)
    current["value"] = "b"
    assert "changed after the confirmation" in str(await tool.fn())
    current["value"] = "a"
    assert await tool.fn() is None and finished == ["a"]
