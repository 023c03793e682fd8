"""Function tools: the ``@function_tool`` decorator, JSON schemas and tool execution.

A function tool is an async (or plain) function whose signature and Google-style docstring
describe what the LLM may call. ``@function_tool`` turns it into a :class:`FunctionTool`,
which carries the tool's name, description and JSON schema (built with msgspec) and can be
awaited like the function. Decorated methods of a class (an ``Agent`` subclass) are bound per
instance, like ordinary methods.

:func:`execute_function_call` runs one :class:`~agents_trio.chat.FunctionCall` against a set of
tools and maps whatever happens (a return value, a handoff to another agent, ``ToolError``,
``StopResponse``, an unexpected exception) to a :class:`ToolOutcome` holding the
:class:`~agents_trio.chat.FunctionCallOutput` shown to the LLM.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import logging
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

import msgspec

from ._errors import StopResponse, ToolError
from ._ids import now
from .chat import FunctionCall, FunctionCallOutput
from .nurseries import single_leaf

__all__ = [
    "FunctionTool",
    "ToolFlag",
    "ToolOutcome",
    "execute_function_call",
    "find_function_tools",
    "function_tool",
    "parse_arguments",
]

logger = logging.getLogger("agents_trio")

F = TypeVar("F", bound=Callable[..., Any])

INTERNAL_ERROR_OUTPUT = "An internal error occurred"
INVALID_OUTPUT = "the tool returned an invalid output"
MULTIPLE_AGENTS_OUTPUT = "the tool returned more than one agent"

_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns|Return|Yields|Yield|Raises|Raise|Examples?|Notes?|Attributes|Warnings?|"
    r"See Also|Todo|References)\s*:\s*$"
)
_ARGS_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params"})
_ARG_LINE_RE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class ToolFlag(enum.IntFlag):
    """Flags changing how the runtime treats a tool.

    Attributes:
        NONE: No special treatment.
        IGNORE_ON_ENTER: Hidden from replies generated inside the agent's ``on_enter``.
        CANCELLABLE: The tool may be cancelled when its activity closes.
    """

    NONE = 0
    IGNORE_ON_ENTER = 1
    CANCELLABLE = 2


# --------------------------------------------------------------------------------------------
# Docstrings


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and per-argument descriptions.

    Args:
        doc: The raw docstring, or None.

    Returns:
        The text before the first section header (stripped, lines joined by spaces) and a
        mapping of argument name to description taken from the ``Args:`` section.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    body: list[str] = []
    for line in lines:
        match = _SECTION_RE.match(line)
        if match:
            _collect_args(section, body, args)
            section, body = match.group(1), []
        elif section is None:
            summary.append(line.strip())
        else:
            body.append(line)
    _collect_args(section, body, args)
    return " ".join(part for part in summary if part), args


def _collect_args(section: str | None, body: list[str], out: dict[str, str]) -> None:
    """Parse the lines of one docstring section into ``out`` if it is an ``Args:`` section."""
    if section not in _ARGS_SECTIONS:
        return
    indents = [len(line) - len(line.lstrip()) for line in body if line.strip()]
    if not indents:
        return
    base = min(indents)
    current: str | None = None
    for line in body:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE_RE.match(line.strip()) if indent == base else None
        if match:
            current = match.group(1)
            out[current] = match.group(2).strip()
        elif current is not None:
            out[current] = f"{out[current]} {line.strip()}".strip()


# --------------------------------------------------------------------------------------------
# Signatures and schemas


class ToolContext:
    """Base of the context a tool receives (``RunContext``): a tool parameter annotated with
    a subclass gets the call's context, and the parameter is never shown to the LLM. Defined
    here so that the tools do not depend on what the context holds (the session)."""


def _is_run_context(annotation: object) -> bool:
    """True for ``RunContext`` (any ``ToolContext``), its subclasses and parametrised forms
    (``RunContext[X]``)."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    target = typing.get_origin(annotation) or annotation
    return isinstance(target, type) and issubclass(target, ToolContext)


def _has_description(annotation: object) -> bool:
    """True when an ``Annotated`` type already carries a ``msgspec.Meta`` description."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    metadata = typing.get_args(annotation)[1:]
    return any(isinstance(m, msgspec.Meta) and m.description for m in metadata)


def _resolve_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The resolved parameter annotations of ``fn`` (strings evaluated, extras kept).

    The return annotation is ignored: it often names a class that does not exist yet when
    the decorator runs (a handoff tool returning the agent class defined below).

    Raises:
        TypeError: A parameter annotation cannot be resolved.
    """
    raw = dict(getattr(fn, "__annotations__", None) or {})
    raw.pop("return", None)
    globalns = getattr(inspect.unwrap(fn), "__globals__", {})
    hints: dict[str, Any] = {}
    for name, annotation in raw.items():
        holder = types.SimpleNamespace(__annotations__={name: annotation})
        try:
            hints.update(typing.get_type_hints(holder, globalns=globalns, include_extras=True))
        except Exception as exc:  # NameError for names only defined locally, etc.
            raise TypeError(f"cannot resolve the annotation of parameter {name!r} of "
                            f"{fn.__qualname__}: {exc}") from exc
    return hints


def _struct_name(tool_name: str) -> str:
    """``get_weather`` -> ``GetWeatherArgs``."""
    parts = re.split(r"[^0-9A-Za-z]+", tool_name)
    return "".join(p[:1].upper() + p[1:] for p in parts if p) + "Args"


def _default_field(default: object) -> object:
    """A msgspec default for a parameter default (factories for non-empty mutables)."""
    if isinstance(default, (list, dict, set, bytearray)) and default:
        return msgspec.field(default_factory=lambda: copy.deepcopy(default))
    return default


class _Signature(msgspec.Struct, frozen=True):
    """What the tool machinery needs to know about a tool function's parameters."""

    struct: Any  # the msgspec Struct type of the LLM-visible arguments
    arg_names: tuple[str, ...]
    context_params: tuple[str, ...]


def _analyse(fn: Callable[..., Any], tool_name: str, arg_docs: Mapping[str, str],
             is_method: bool) -> _Signature:
    """Build the argument Struct type of ``fn`` and find its ``RunContext`` parameters."""
    hints = _resolve_hints(fn)
    params = list(inspect.signature(fn).parameters.values())
    if is_method and params:
        params = params[1:]
    fields: list[tuple[Any, ...]] = []
    context: list[str] = []
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{fn.__qualname__}: positional-only parameter {param.name!r} is "
                            "not supported by function tools")
        annotation = hints.get(param.name, Any)
        if _is_run_context(annotation):
            context.append(param.name)
            continue
        fields.append(_field_spec(param, annotation, arg_docs.get(param.name)))
    struct = msgspec.defstruct(_struct_name(tool_name), fields, kw_only=True)
    return _Signature(struct=struct, arg_names=tuple(f[0] for f in fields),
                      context_params=tuple(context))


def _field_spec(param: inspect.Parameter, annotation: object, doc: str | None) -> tuple[Any, ...]:
    """The ``defstruct`` field for one parameter: name, type (with description), default."""
    if doc and not _has_description(annotation):
        annotation = typing.Annotated[annotation, msgspec.Meta(description=doc)]
    if param.default is inspect.Parameter.empty:
        return (param.name, annotation)
    return (param.name, annotation, _default_field(param.default))


def _object_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON schema of ``struct`` with its own definition inlined at the top level."""
    schema = msgspec.json.schema(struct)
    defs: dict[str, Any] = schema.pop("$defs", {})
    ref = schema.pop("$ref", None)
    if ref is not None:
        schema = {**defs.pop(ref.rsplit("/", 1)[-1]), **schema}
    if defs:
        schema["$defs"] = defs
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


# --------------------------------------------------------------------------------------------
# FunctionTool


def _defined_in_class(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` was defined directly in a class body (so it is a method)."""
    parts = getattr(fn, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


class FunctionTool:
    """A function the LLM can call, with its name, description and JSON schema.

    Build it with :func:`function_tool`. A tool defined in a class body is a descriptor:
    accessing it on an instance returns a bound copy whose call passes that instance as
    ``self``.

    Attributes:
        fn: The decorated function.
        name: The name shown to the LLM.
        description: The description shown to the LLM.
        flags: The tool's :class:`ToolFlag`.
        raw_schema: The raw schema given to the decorator, if any.
        parameters_schema: The JSON schema object of the LLM-visible arguments.
        context_params: Names of the parameters receiving the ``RunContext``.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, raw_schema: dict[str, Any] | None = None,
                 flags: ToolFlag = ToolFlag.NONE) -> None:
        self.fn = fn
        self.flags = ToolFlag(flags)
        self.raw_schema = raw_schema
        self.is_method = _defined_in_class(fn)
        #: the object a method tool is bound to (None: unbound, or a plain function)
        self.instance: object | None = None
        self._signature: _Signature | None = None  # None for raw-schema tools
        if raw_schema is not None:
            self._init_raw(raw_schema, name, description)
        else:
            self._init_from_signature(name, description)

    def _init_from_signature(self, name: str | None, description: str | None) -> None:
        summary, arg_docs = _parse_docstring(self.fn.__doc__)
        self.name = name or self.fn.__name__
        self.description = description if description is not None else summary
        signature = self._signature = _analyse(self.fn, self.name, arg_docs, self.is_method)
        self.parameters_schema = _object_schema(signature.struct)
        self.context_params = signature.context_params

    def _init_raw(self, raw_schema: dict[str, Any], name: str | None,
                  description: str | None) -> None:
        if not (name or raw_schema.get("name")):
            raise ValueError("raw_schema must contain a 'name'")
        self.name = name or raw_schema["name"]
        self.description = (description if description is not None
                            else raw_schema.get("description", ""))
        self.parameters_schema = copy.deepcopy(
            raw_schema.get("parameters") or {"type": "object", "properties": {}, "required": []})
        hints = _resolve_hints(self.fn)
        self.context_params = tuple(n for n, t in hints.items() if _is_run_context(t))
        self._signature = None

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI-style (non-strict) tool schema."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": copy.deepcopy(self.parameters_schema)}}

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The names of the arguments the LLM gives (empty for raw-schema tools)."""
        return self._signature.arg_names if self._signature is not None else ()

    @property
    def args_struct(self) -> type[msgspec.Struct] | None:
        """The msgspec Struct type validating the arguments (None for raw-schema tools)."""
        return self._signature.struct if self._signature is not None else None

    def __get__(self, instance: object, owner: type | None = None) -> FunctionTool:
        if instance is None or not self.is_method:
            return self
        bound = copy.copy(self)
        bound.instance = instance
        return bound

    async def __call__(self, *args: object, **kwargs: object) -> object:
        """Call the function (awaiting it when it is async); bound tools pass ``self``."""
        if self.instance is not None:
            args = (self.instance, *args)
        result = self.fn(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FunctionTool):
            return NotImplemented
        return (self.fn, self.name, self.instance) == (other.fn, other.name, other.instance)

    def __hash__(self) -> int:
        return hash((self.fn, self.name, id(self.instance)))

    def __repr__(self) -> str:
        bound = f" bound to {self.instance!r}" if self.instance is not None else ""
        return f"<FunctionTool {self.name!r}{bound}>"


@overload
def function_tool(fn: F, /, *, name: str | None = None, description: str | None = None,
                  raw_schema: dict[str, Any] | None = None,
                  flags: ToolFlag = ToolFlag.NONE) -> FunctionTool: ...


@overload
def function_tool(*, name: str | None = None, description: str | None = None,
                  raw_schema: dict[str, Any] | None = None,
                  flags: ToolFlag = ToolFlag.NONE) -> Callable[[F], FunctionTool]: ...


def function_tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
                  description: str | None = None, raw_schema: dict[str, Any] | None = None,
                  flags: ToolFlag = ToolFlag.NONE) -> Any:
    """Turn a function (or a method) into a :class:`FunctionTool`.

    Usable bare (``@function_tool``) or with arguments (``@function_tool(name="x")``).

    Args:
        fn: The function, when used bare.
        name: The tool name; defaults to the function's ``__name__``.
        description: The description; defaults to the docstring summary.
        raw_schema: A ready-made schema ``{"name", "description", "parameters"}``; the
            function then receives the decoded arguments as ``raw_arguments``.
        flags: :class:`ToolFlag` values.

    Returns:
        The tool, or a decorator producing it.
    """

    def decorate(func: Callable[..., Any]) -> FunctionTool:
        if isinstance(func, FunctionTool):
            func = func.fn
        return FunctionTool(func, name=name, description=description, raw_schema=raw_schema,
                            flags=flags)

    return decorate if fn is None else decorate(fn)


def find_function_tools(obj: object) -> list[FunctionTool]:
    """The function tools defined on ``type(obj)``, bound to ``obj``, in definition order.

    Base classes come first; a subclass attribute with the same name replaces the base's tool
    (in its place), and a non-tool attribute hides it.

    Args:
        obj: The instance (typically an Agent).

    Returns:
        The bound tools.
    """
    found: dict[str, FunctionTool] = {}
    for cls in reversed(type(obj).__mro__):
        for attr, value in vars(cls).items():
            if isinstance(value, FunctionTool):
                found[attr] = value
            elif attr in found:
                del found[attr]
    return [tool.__get__(obj, type(obj)) for tool in found.values()]


# --------------------------------------------------------------------------------------------
# Arguments


def _decode_object(tool: FunctionTool, arguments_json: str) -> dict[str, Any]:
    """Decode the JSON arguments; they must be an object (empty text counts as ``{}``)."""
    try:
        data = msgspec.json.decode(arguments_json.strip() or "{}")
    except msgspec.DecodeError as exc:
        raise ToolError(f"Error parsing arguments for `{tool.name}`: {exc}") from None
    if not isinstance(data, dict):
        raise ToolError(f"Error parsing arguments for `{tool.name}`: "
                        f"Expected `object`, got `{type(data).__name__}`")
    return data


def parse_arguments(tool: FunctionTool, arguments_json: str) -> dict[str, Any]:
    """Decode and validate the JSON arguments of a call to ``tool``.

    Validation is lax like pydantic's default (``"5"`` is accepted for an ``int``).

    Args:
        tool: The tool being called.
        arguments_json: The call's arguments, a JSON object.

    Returns:
        The keyword arguments given by the LLM, converted to the declared types (parameters
        the LLM left out are absent, so the function's own defaults apply). For raw-schema
        tools: ``{"raw_arguments": <decoded object>}``.

    Raises:
        ToolError: ``Error parsing arguments for `<name>`: <detail>``; the detail names the
            offending field.
    """
    data = _decode_object(tool, arguments_json)
    if tool.args_struct is None:
        return {"raw_arguments": data}
    try:
        args = msgspec.convert(data, tool.args_struct, strict=False)
    except msgspec.ValidationError as exc:
        raise ToolError(f"Error parsing arguments for `{tool.name}`: {exc}") from None
    return {name: getattr(args, name) for name in tool.arg_names if name in data}


# --------------------------------------------------------------------------------------------
# Execution


@dataclasses.dataclass(frozen=True)
class ToolOutcome:
    """What executing one function call produced.

    Attributes:
        output: The output item for the chat context (always present).
        reply_required: Whether the LLM should reply to the output.
        agent: The agent to hand off to, if the tool returned one.
        exception: The unexpected exception the tool raised (not set for ``ToolError`` /
            ``StopResponse``, which are expected ways to end a tool).
    """

    output: FunctionCallOutput
    reply_required: bool = False
    agent: Any | None = None
    exception: BaseException | None = None


def _never_agent(_: object) -> bool:
    return False


def _output(call: FunctionCall, text: str, *, is_error: bool = False) -> FunctionCallOutput:
    return FunctionCallOutput(call_id=call.call_id, name=call.name, output=text,
                              is_error=is_error, created_at=now())


def _error(call: FunctionCall, text: str) -> ToolOutcome:
    # Errors are shown to the LLM, which answers them (LiveKit's default reply_required=True).
    return ToolOutcome(output=_output(call, text, is_error=True), reply_required=True)


CANCELLED_BY_CLOSE_OUTPUT = "the tool call was cancelled because the session closed"
CANCELLED_BY_HANDOFF_OUTPUT = ("the tool call was cancelled because another agent took over "
                               "the session")


def cancelled_outcome(call: FunctionCall, *, closing: bool) -> ToolOutcome:
    """The outcome of a call whose agent was stopped under it (the session closed, or
    another agent took over): an error output, so the history answers every call; no reply."""
    text = CANCELLED_BY_CLOSE_OUTPUT if closing else CANCELLED_BY_HANDOFF_OUTPUT
    return ToolOutcome(output=_output(call, text, is_error=True), reply_required=False)


def _is_valid_output(value: object) -> bool:
    """True for str/int/float/bool/None and lists/tuples/sets/dicts of those."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_is_valid_output(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, (str, int, float)) and not isinstance(k, bool)
                   and _is_valid_output(v) for k, v in value.items())
    return False


def _output_text(value: object) -> str:
    """The output text of a valid return value (JSON for containers, "" for None)."""
    if value is None:
        return ""
    if isinstance(value, (str, int, float, bool)):
        return str(value)
    return msgspec.json.encode(value).decode()


def _split_agent(value: object, is_agent: Callable[[object], bool]
                 ) -> tuple[list[object], object]:
    """Separate the agents from a return value.

    Returns:
        The agents found (the value itself, or items of a list/tuple/set) and what remains:
        None, the single remaining item, or a list of the remaining items.
    """
    if is_agent(value):
        return [value], None
    if not isinstance(value, (list, tuple, set, frozenset)):
        return [], value
    agents = [v for v in value if is_agent(v)]
    if not agents:
        return [], value
    rest = [v for v in value if not is_agent(v)]
    return agents, (None if not rest else rest[0] if len(rest) == 1 else rest)


def _outcome_from_value(call: FunctionCall, value: object,
                        is_agent: Callable[[Any], bool]) -> ToolOutcome:
    """Map a tool's return value to its outcome (see module docs / reference 5.2)."""
    agents, rest = _split_agent(value, is_agent)
    if len(agents) > 1:
        return _error(call, MULTIPLE_AGENTS_OUTPUT)
    if not _is_valid_output(rest):
        return _error(call, INVALID_OUTPUT)
    try:
        text = _output_text(rest)
    except (TypeError, msgspec.EncodeError):
        return _error(call, INVALID_OUTPUT)
    return ToolOutcome(output=_output(call, text), reply_required=rest is not None,
                       agent=agents[0] if agents else None)


def _outcome_from_exception(call: FunctionCall, exc: Exception) -> ToolOutcome:
    """Map an exception raised by a tool to its outcome."""
    leaf = single_leaf(exc)
    if isinstance(leaf, ToolError):
        return _error(call, leaf.message)
    if isinstance(leaf, StopResponse):
        return ToolOutcome(output=_output(call, ""), reply_required=False)
    logger.exception("exception occurred while executing tool %r", call.name,
                     extra={"function": call.name, "call_id": call.call_id})
    return ToolOutcome(output=_output(call, INTERNAL_ERROR_OUTPUT, is_error=True),
                       reply_required=True, exception=exc)


async def execute_function_call(
        call: FunctionCall, tools: Mapping[str, FunctionTool], *,
        make_context: Callable[[FunctionCall], ToolContext] | None = None,
        is_agent: Callable[[Any], bool] = _never_agent) -> ToolOutcome:
    """Run one function call and map its result to a :class:`ToolOutcome`.

    Args:
        call: The call the LLM made.
        tools: The available tools by name (the order is used in the unknown-function
            message).
        make_context: Builds the ``RunContext`` passed to the tool's context parameter(s);
            when None such parameters receive None.
        is_agent: Tells whether a returned value is an Agent (a handoff).

    Returns:
        The outcome; it always carries an output (created at the time the tool returned).

    Raises:
        trio.Cancelled: And any other non-``Exception`` BaseException, never swallowed.
    """
    tool = tools.get(call.name)
    if tool is None:
        return _error(call, f"Unknown function: {call.name} - available tools: "
                            f"{', '.join(tools)}")
    try:
        kwargs = parse_arguments(tool, call.arguments)
    except ToolError as exc:
        return _error(call, exc.message)
    if tool.context_params:
        context = make_context(call) if make_context is not None else None
        kwargs.update(dict.fromkeys(tool.context_params, context))
    try:
        value = await tool(**kwargs)
    except Exception as exc:
        return _outcome_from_exception(call, exc)
    return _outcome_from_value(call, value, is_agent)
