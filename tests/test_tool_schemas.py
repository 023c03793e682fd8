"""Tool schemas are LiveKit's: the same function gives the same legacy and strict schemas with
``agents_trio.function_tool`` as with ``livekit.agents.llm.function_tool``, and the same
validated arguments.

Each function of the battery below is decorated twice: once as written (its ``RunContext`` is
ours) and once as a copy whose globals name LiveKit's ``RunContext`` instead.
"""

from __future__ import annotations

import enum
import json
import types
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field

from agents_trio import RunContext
from agents_trio.tools import (
    FunctionTool,
    build_legacy_openai_schema,
    build_strict_openai_schema,
    function_tool,
    parse_arguments,
)

lk_llm = pytest.importorskip("livekit.agents.llm")
lk_voice = pytest.importorskip("livekit.agents.voice")
from livekit.agents.llm import utils as lk_utils  # noqa: E402


class Color(str, enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    """A postal address."""

    street: str = Field(description="Street and number")
    city: str
    zip_code: Optional[str] = None


class Order(BaseModel):
    item: str
    quantity: int = Field(default=1, ge=1, le=10)
    address: Address
    gift: Optional[Address] = None
    tags: list[str] = []


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    good: bool = True


class UserData:
    pass


async def plain(name: str, age: int, height: float, member: bool) -> str:
    """Register a person."""
    return name


async def optionals(a: Optional[int] = None, b: int | None = None, c: str | None = "x",
                    d: Optional[str] = "y") -> None:
    """Optional parameters, with and without defaults."""


async def required_optional(a: Optional[int], b: str | None) -> None:
    """Nullable but required."""


async def defaults(unit: str = "celsius", days: int = 3, ratio: float = 0.5,
                   loud: bool = False) -> None:
    """Parameters with defaults."""


async def literals(mode: Literal["fast", "slow"], level: Literal[1, 2, 3] = 2,
                   maybe: Optional[Literal["a", "b"]] = None) -> None:
    """Literal choices."""


async def enums(color: Color, level: Level = Level.LOW, other: Optional[Color] = None
                ) -> None:
    """Enum parameters."""


async def containers(names: list[str], counts: dict[str, int], pair: tuple[int, str],
                     flags: list[bool] = [], extra: Optional[dict[str, Any]] = None  # noqa: B006
                     ) -> None:
    """Lists, dicts and tuples."""


async def annotated(
        count: Annotated[int, Field(description="How many", ge=1, le=10)],
        unit: Annotated[str, Field(json_schema_extra={"enum": ["c", "f"]})] = "c",
        code: Annotated[str, Field(min_length=2, max_length=4, pattern="^[A-Z]+$")] = "AB",
        note: Annotated[Optional[str], Field(description="A note")] = None) -> None:
    """Annotated parameters carrying pydantic Field metadata.

    Args:
        count: Overridden by the Field description.
        unit: The unit.
    """


async def with_model(order: Order, backup: Optional[Address] = None) -> str:
    """Place an order.

    Args:
        order: The order to place.
        backup: Where to send it if the first address fails.
    """
    return order.item


async def model_list(addresses: list[Address]) -> None:
    """Several addresses."""


async def unions(pet: Union[Cat, Dog], value: Union[int, str] = 0) -> None:
    """Unions of models and of scalars."""


async def documented(location: str, ctx: RunContext, unit: str = "celsius",
                     days: int = 3) -> str:
    """Look up the weather
    for a place.

    Longer text that is still part of the
    description.

    Args:
        location: The city to look
            the weather up for.
        unit (str): Either celsius or fahrenheit.
        days: How many days.

    Returns:
        A sentence.
    """
    return location


async def with_context(ctx: RunContext[UserData], value: float) -> float:
    """Double a value (the context is never shown)."""
    return value * 2


async def no_params() -> None:
    pass


async def rest_doc(city: str, when: str = "today") -> None:
    """Forecast.

    :param city: The city.
    :param when: The day.
    """


BATTERY: list[Callable[..., Any]] = [
    plain, optionals, required_optional, defaults, literals, enums, containers, annotated,
    with_model, model_list, unions, documented, with_context, no_params, rest_doc]

DECORATIONS: list[dict[str, Any]] = [
    {}, {"name": "renamed", "description": "Given description."},
    {"on_duplicate": "confirm"}]


def livekit_copy(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with LiveKit's ``RunContext`` where ours was named (its annotations are strings,
    resolved in its globals)."""
    assert isinstance(fn, types.FunctionType)
    globalns = {**fn.__globals__, "RunContext": lk_voice.RunContext}
    copy = types.FunctionType(fn.__code__, globalns, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__annotations__ = dict(fn.__annotations__)
    copy.__doc__ = fn.__doc__
    copy.__qualname__ = fn.__qualname__
    copy.__module__ = fn.__module__
    return copy


def both(fn: Callable[..., Any], options: dict[str, Any]) -> tuple[FunctionTool, Any]:
    return (function_tool(fn, **options),
            lk_llm.function_tool(livekit_copy(fn), **options))


def _id(value: Any) -> str:
    return getattr(value, "__name__", None) or json.dumps(value)


@pytest.mark.parametrize("options", DECORATIONS, ids=_id)
@pytest.mark.parametrize("fn", BATTERY, ids=_id)
def test_legacy_schema_is_livekits(fn: Callable[..., Any], options: dict[str, Any]) -> None:
    ours, theirs = both(fn, options)
    assert build_legacy_openai_schema(ours) == lk_utils.build_legacy_openai_schema(theirs)
    assert (build_legacy_openai_schema(ours, internally_tagged=True)
            == lk_utils.build_legacy_openai_schema(theirs, internally_tagged=True))
    assert ours.schema == lk_utils.build_legacy_openai_schema(theirs)


@pytest.mark.parametrize("options", DECORATIONS, ids=_id)
@pytest.mark.parametrize("fn", BATTERY, ids=_id)
def test_strict_schema_is_livekits(fn: Callable[..., Any], options: dict[str, Any]) -> None:
    ours, theirs = both(fn, options)
    assert build_strict_openai_schema(ours) == lk_utils.build_strict_openai_schema(theirs)
    assert ours.strict_schema == lk_utils.build_strict_openai_schema(theirs)


def test_raw_schema_tools_are_sent_as_livekit_sends_them() -> None:
    raw = {"name": "open_gate", "description": "Open a gate.",
           "parameters": {"type": "object", "properties": {"gate": {"type": "string"}},
                          "required": ["gate"]}}

    async def open_gate(raw_arguments: dict[str, object]) -> None:
        pass

    for options in ({}, {"on_duplicate": "confirm"}):
        ours = function_tool(open_gate, raw_schema=raw, **options)
        theirs = lk_llm.function_tool(open_gate, raw_schema=raw, **options)
        lk_ctx = lk_llm.ToolContext([theirs])
        assert [build_strict_openai_schema(ours)] == lk_ctx.parse_function_tools("openai")
        assert ours.raw_schema == theirs.info.raw_schema


ARGUMENTS: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (plain, {"name": "Ann", "age": "42", "height": 1.7, "member": True}),
    (optionals, {}),
    (optionals, {"a": None, "b": None, "c": None, "d": None}),  # strict placeholders
    (defaults, {"unit": None, "days": 5}),
    (literals, {"mode": "fast", "maybe": None}),
    (enums, {"color": "red", "level": 2}),
    (containers, {"names": ["a"], "counts": {"x": 1}, "pair": [1, "b"]}),
    (annotated, {"count": 3, "unit": None, "code": None, "note": None}),
    (with_model, {"order": {"item": "tea", "address": {"street": "1 A St", "city": "B"},
                            "quantity": None, "gift": None, "tags": None}}),
    (model_list, {"addresses": [{"street": "s", "city": "c", "zip_code": None}]}),
    (unions, {"pet": {"kind": "dog", "good": None}, "value": "seven"}),
    (documented, {"location": "Paris", "unit": None, "days": None}),
]


@pytest.mark.parametrize(("fn", "arguments"), ARGUMENTS,
                         ids=[f"{fn.__name__}-{i}" for i, (fn, _) in enumerate(ARGUMENTS)])
def test_arguments_validate_as_livekits(fn: Callable[..., Any], arguments: dict[str, Any]
                                        ) -> None:
    ours, theirs = both(fn, {})
    expected = lk_utils.validated_arguments(theirs, json.loads(json.dumps(arguments)))
    assert parse_arguments(ours, json.dumps(arguments)) == expected


async def test_a_model_parameter_receives_a_model_instance() -> None:
    tool = function_tool(with_model)
    kwargs = parse_arguments(tool, json.dumps(
        {"order": {"item": "tea", "address": {"street": "1 A St", "city": "Bern"}}}))
    assert isinstance(kwargs["order"], Order)
    assert kwargs["order"].address.city == "Bern"
    assert kwargs["order"].quantity == 1
    assert await tool(**kwargs) == "tea"


def test_field_constraints_are_enforced() -> None:
    from agents_trio import ToolError
    tool = function_tool(annotated)
    with pytest.raises(ToolError, match="count"):
        parse_arguments(tool, json.dumps({"count": 11}))


@pytest.mark.parametrize("options", DECORATIONS, ids=_id)
@pytest.mark.parametrize("fn", BATTERY, ids=_id)
def test_a_livekit_plugin_is_given_the_schemas_livekit_would_send(
        fn: Callable[..., Any], options: dict[str, Any]) -> None:
    from agents_trio.plugins._convert import to_lk_tools
    ours, theirs = both(fn, options)
    given = lk_llm.ToolContext(to_lk_tools([ours]))
    native = lk_llm.ToolContext([theirs])
    for fmt, kwargs in [("openai", {"strict": True}), ("openai", {"strict": False}),
                        ("openai.responses", {}), ("anthropic", {}), ("google", {})]:
        assert (given.parse_function_tools(fmt, **kwargs)
                == native.parse_function_tools(fmt, **kwargs)), fmt
