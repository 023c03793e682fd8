"""Function tools: the ``@function_tool`` decorator, JSON schemas and tool execution.

A function tool is an async (or plain) function whose signature and Google-style docstring
describe what the LLM may call. ``@function_tool`` turns it into a :class:`FunctionTool`,
which carries the tool's name, description and JSON schemas (built as LiveKit Agents builds
them: a pydantic model of the parameters, see :mod:`agents_trio.tool_schema`) and can be
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
from typing import Any, Literal, TypeVar, overload

import msgspec
import pydantic

from ._errors import StopResponse, ToolError
from ._ids import now
from .chat import FunctionCall, FunctionCallOutput
from .nurseries import single_leaf
from .tool_mocks import run_mock
from .tool_schema import (arguments_model, docstring_summary, fill_defaults, model_name,
                          strict_json_schema)

__all__ = [
    "FunctionTool",
    "FunctionToolInfo",
    "RawFunctionTool",
    "RawFunctionToolInfo",
    "ToolFlag",
    "ToolOutcome",
    "ToolResult",
    "build_legacy_openai_schema",
    "build_strict_openai_schema",
    "execute_function_call",
    "find_function_tools",
    "function_tool",
    "parse_arguments",
    "validated_arguments",
]

logger = logging.getLogger("agents_trio")

F = TypeVar("F", bound=Callable[..., Any])

INTERNAL_ERROR_OUTPUT = "An internal error occurred"
INVALID_OUTPUT = "the tool returned an invalid output"
MULTIPLE_AGENTS_OUTPUT = "the tool returned more than one agent"


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
# Signatures


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


#: the parameter ``on_duplicate="confirm"`` adds: the LLM sets it to run a duplicate anyway
CONFIRM_DUPLICATE_PARAM = "lk_agents_confirm_duplicate"
CONFIRM_DUPLICATE_DESCRIPTION = (
    "Set this to True to confirm you want to run a duplicate. "
    "Only do this when user confirms the duplication is needed.")
_CONFIRM_ANNOTATION = typing.Annotated[
    typing.Optional[bool],  # noqa: UP045 - the schema LiveKit shows is built from this form
    pydantic.Field(default=False, description=CONFIRM_DUPLICATE_DESCRIPTION)]

DuplicateMode = Literal["allow", "reject", "replace", "confirm"]
DuplicateScope = Literal["name", "name_and_args"]
_DUPLICATE_MODES = typing.get_args(DuplicateMode)
_DUPLICATE_SCOPES = typing.get_args(DuplicateScope)


class _Signature:
    """What the tool machinery needs to know about a tool function's parameters."""

    def __init__(self, fn: Callable[..., Any], *, is_method: bool,
                 arg_docs: Mapping[str, str | None], confirm: bool) -> None:
        hints = _resolve_hints(fn)
        params = list(inspect.signature(fn).parameters.values())
        if is_method and params:
            params = params[1:]
        visible: list[inspect.Parameter] = []
        context: list[str] = []
        for param in params:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if param.kind is param.POSITIONAL_ONLY:
                raise TypeError(f"{fn.__qualname__}: positional-only parameter "
                                f"{param.name!r} is not supported by function tools")
            if _is_run_context(hints.get(param.name)):
                context.append(param.name)
            else:
                visible.append(param)
        if confirm:
            visible.append(inspect.Parameter(CONFIRM_DUPLICATE_PARAM,
                                             inspect.Parameter.KEYWORD_ONLY, default=False))
            hints[CONFIRM_DUPLICATE_PARAM] = _CONFIRM_ANNOTATION
        self.visible = tuple(visible)
        self.hints = {p.name: hints.get(p.name, Any) for p in visible}
        self.context_params = tuple(context)
        try:
            self.model = arguments_model(model_name(fn), visible, hints, arg_docs)
            self.legacy = self.model.model_json_schema()
        except pydantic.PydanticUserError as exc:  # e.g. a type without a JSON schema
            raise TypeError(f"{fn.__qualname__}: cannot build the tool's argument schema: "
                            f"{exc}") from exc

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.visible)


# --------------------------------------------------------------------------------------------
# FunctionTool


def _defined_in_class(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` was defined directly in a class body (so it is a method)."""
    parts = getattr(fn, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


@dataclasses.dataclass
class FunctionToolInfo:
    """What LiveKit's ``FunctionTool.info`` holds: name, description, flags, duplicates."""

    name: str
    description: str | None
    flags: ToolFlag
    on_duplicate: DuplicateMode = "allow"
    duplicate_scope: DuplicateScope = "name"


@dataclasses.dataclass
class RawFunctionToolInfo:
    """``RawFunctionTool.info``: the name, the schema given as is, flags, duplicates."""

    name: str
    raw_schema: dict[str, Any]
    flags: ToolFlag
    on_duplicate: DuplicateMode = "allow"
    duplicate_scope: DuplicateScope = "name"


#: the names some major provider accepts: OpenAI's and Anthropic's ``[a-zA-Z0-9_-]``,
#: with Gemini's ``.`` and ``:``, up to Anthropic's (and Vertex's) 128 characters
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}", re.ASCII)


def check_tool_name(name: str) -> str:
    """``name`` if an LLM provider can take it as a tool's name; every major provider
    refuses the others (a space, ``/``, ``<lambda>``, a non-ASCII letter, over 128
    characters), and with them every request offering the tool.

    Raises:
        ValueError: No major provider accepts ``name``.
    """
    if not _TOOL_NAME.fullmatch(name):
        raise ValueError(
            f"tool name {name!r} is refused by LLM providers: use letters, digits, '_' and "
            "'-' (OpenAI's and Anthropic's rule; Gemini also takes '.' and ':'), at most 128 "
            "characters (64 for OpenAI and Gemini); function_tool(name=...) renames it")
    return name


class FunctionTool:
    """A function the LLM can call, with its name, description and JSON schemas.

    Build it with :func:`function_tool`. A tool defined in a class body is a descriptor:
    accessing it on an instance returns a bound copy whose call passes that instance as
    ``self``.

    Attributes:
        fn: The decorated function.
        name: The name shown to the LLM (also ``id``).
        description: The description shown to the LLM.
        flags: The tool's :class:`ToolFlag`.
        on_duplicate: What a call does while another call of this tool runs (``"allow"``,
            ``"reject"``, ``"replace"`` or ``"confirm"``).
        duplicate_scope: What counts as another call: the same name (``"name"``), or the
            same name and validated arguments (``"name_and_args"``).
        raw_schema: The raw schema given to the decorator, if any.
        parameters_schema: The JSON schema object of the LLM-visible arguments (legacy form).
        context_params: Names of the parameters receiving the ``RunContext``.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, raw_schema: dict[str, Any] | None = None,
                 flags: ToolFlag = ToolFlag.NONE, on_duplicate: DuplicateMode = "allow",
                 duplicate_scope: DuplicateScope = "name") -> None:
        if not callable(fn):
            raise TypeError(f"a function tool wraps a callable, got {fn!r}")
        for arg, value in (("name", name), ("description", description)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"the tool's {arg} must be a str, got {value!r}")
        if on_duplicate not in _DUPLICATE_MODES:
            raise ValueError(f"on_duplicate must be one of {_DUPLICATE_MODES}, "
                             f"got {on_duplicate!r}")
        if duplicate_scope not in _DUPLICATE_SCOPES:
            raise ValueError(f"duplicate_scope must be one of {_DUPLICATE_SCOPES}, "
                             f"got {duplicate_scope!r}")
        self.fn = fn
        self.flags = ToolFlag(flags)
        self.on_duplicate: DuplicateMode = on_duplicate
        self.duplicate_scope: DuplicateScope = duplicate_scope
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
        summary, arg_docs = docstring_summary(self.fn)
        self.name = check_tool_name(name or self.fn.__name__)
        self.description = description or summary or ""
        signature = self._signature = _Signature(
            self.fn, is_method=self.is_method, arg_docs=arg_docs,
            confirm=self.on_duplicate == "confirm")
        self.parameters_schema: dict[str, Any] = signature.legacy
        self.context_params = signature.context_params

    def _init_raw(self, raw_schema: dict[str, Any], name: str | None,
                  description: str | None) -> None:
        if not isinstance(raw_schema, Mapping):
            raise TypeError("raw_schema must be a dict with 'name', 'description' and "
                            f"'parameters', got {type(raw_schema).__name__}")
        if not (name or raw_schema.get("name")):
            raise ValueError("raw_schema must contain a 'name'")
        if "parameters" not in raw_schema:
            raise ValueError("raw_schema must contain 'parameters' (an empty object schema "
                             "for a tool without arguments)")
        # what every LLM request would carry: a provider refuses the request
        if not isinstance(raw_schema.get("name", ""), str):
            raise TypeError(f"raw_schema's name must be a str, got {raw_schema['name']!r}")
        if not isinstance(raw_schema.get("description", ""), (str, type(None))):
            raise TypeError("raw_schema's description must be a str, got "
                            f"{raw_schema['description']!r}")
        if not isinstance(raw_schema["parameters"], Mapping):
            raise TypeError("raw_schema's parameters must be a JSON schema object (a dict), "
                            f"got {raw_schema['parameters']!r}")
        raw_schema = copy.deepcopy(raw_schema)
        if self.on_duplicate == "confirm":
            raw_schema["parameters"] = _with_confirm_param(raw_schema["parameters"])
        self.raw_schema = raw_schema
        self.name = check_tool_name(name or raw_schema["name"])
        self.description = (description if description is not None
                            else raw_schema.get("description") or "")
        self.parameters_schema = copy.deepcopy(raw_schema["parameters"])
        hints = _resolve_hints(self.fn)
        self.context_params = tuple(n for n, t in hints.items() if _is_run_context(t))
        self._signature = None

    @property
    def id(self) -> str:
        """The tool's unique name (LiveKit's ``Tool.id``)."""
        return self.name

    @property
    def info(self) -> FunctionToolInfo | RawFunctionToolInfo:
        """LiveKit's ``FunctionTool.info`` view of this tool."""
        if self.raw_schema is not None:
            return RawFunctionToolInfo(name=self.name, raw_schema=copy.deepcopy(self.raw_schema),
                                       flags=self.flags, on_duplicate=self.on_duplicate,
                                       duplicate_scope=self.duplicate_scope)
        return FunctionToolInfo(name=self.name, description=self.description or None,
                                flags=self.flags, on_duplicate=self.on_duplicate,
                                duplicate_scope=self.duplicate_scope)

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI-style (non-strict) tool schema: :func:`build_legacy_openai_schema`."""
        return build_legacy_openai_schema(self)

    @property
    def strict_schema(self) -> dict[str, Any]:
        """The OpenAI strict-mode tool schema: :func:`build_strict_openai_schema`."""
        return build_strict_openai_schema(self)

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The names of the arguments the LLM gives (empty for raw-schema tools)."""
        return self._signature.arg_names if self._signature is not None else ()

    @property
    def args_model(self) -> type[pydantic.BaseModel] | None:
        """The pydantic model validating the arguments (None for raw-schema tools)."""
        return self._signature.model if self._signature is not None else None

    @property
    def signature_parameters(self) -> tuple[inspect.Parameter, ...]:
        """The LLM-visible parameters with their resolved annotations (empty for raw tools)."""
        if self._signature is None:
            return ()
        hints = self._signature.hints
        return tuple(p.replace(annotation=hints[p.name]) for p in self._signature.visible)

    def __get__(self, instance: object, owner: type | None = None) -> FunctionTool:
        if instance is None or not self.is_method:
            return self
        bound = copy.copy(self)
        bound.instance = instance
        return bound

    async def __call__(self, *args: object, **kwargs: object) -> object:
        """Call the function (awaiting it when it is async); bound tools pass ``self``.

        Cancellation: cancels the function's own awaits.
        """
        kwargs.pop(CONFIRM_DUPLICATE_PARAM, None)
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
        return f"<{type(self).__name__} {self.name!r}{bound}>"


class RawFunctionTool(FunctionTool):
    """A tool whose schema was given as is (``@function_tool(raw_schema=...)``); its function
    receives the decoded arguments as ``raw_arguments``."""


def _with_confirm_param(parameters: dict[str, Any]) -> dict[str, Any]:
    """A raw parameters schema with the (required, nullable) confirm-duplicate flag added."""
    params = dict(parameters)
    params["properties"] = {**params.get("properties", {}), CONFIRM_DUPLICATE_PARAM: {
        "type": ["boolean", "null"], "description": CONFIRM_DUPLICATE_DESCRIPTION}}
    required = list(params.get("required", []))
    if CONFIRM_DUPLICATE_PARAM not in required:
        required.append(CONFIRM_DUPLICATE_PARAM)
    params["required"] = required
    return params


def build_legacy_openai_schema(tool: FunctionTool, *, internally_tagged: bool = False
                               ) -> dict[str, Any]:
    """The non-strict OpenAI schema of ``tool``: the arguments model's own JSON schema.

    Args:
        tool: The tool.
        internally_tagged: The Responses API's flat form (``name``, ``description``,
            ``parameters`` and ``type`` side by side) instead of ``{"type", "function"}``.
    """
    if tool.raw_schema is not None:
        function = copy.deepcopy(tool.raw_schema)
        return ({**function, "type": "function"} if internally_tagged
                else {"type": "function", "function": function})
    function = {"name": tool.name, "description": tool.description or "",
                "parameters": copy.deepcopy(tool.parameters_schema)}
    if internally_tagged:
        return {**function, "type": "function"}
    return {"type": "function", "function": function}


def build_strict_openai_schema(tool: FunctionTool) -> dict[str, Any]:
    """The strict-mode OpenAI schema of ``tool`` (a raw-schema tool's schema is sent as is)."""
    if tool.raw_schema is not None:
        return {"type": "function", "function": copy.deepcopy(tool.raw_schema)}
    parameters = strict_json_schema(copy.deepcopy(tool.parameters_schema))
    return {"type": "function", "function": {"name": tool.name, "strict": True,
                                             "description": tool.description or "",
                                             "parameters": parameters}}


@overload
def function_tool(f: F, *, name: str | None = None, description: str | None = None,
                  raw_schema: dict[str, Any] | None = None, flags: ToolFlag = ToolFlag.NONE,
                  on_duplicate: DuplicateMode = "allow",
                  duplicate_scope: DuplicateScope = "name") -> FunctionTool: ...


@overload
def function_tool(f: None = None, *, name: str | None = None,
                  description: str | None = None, raw_schema: dict[str, Any] | None = None,
                  flags: ToolFlag = ToolFlag.NONE, on_duplicate: DuplicateMode = "allow",
                  duplicate_scope: DuplicateScope = "name") -> Callable[[F], FunctionTool]: ...


def function_tool(f: Callable[..., Any] | None = None, *, name: str | None = None,
                  description: str | None = None, raw_schema: dict[str, Any] | None = None,
                  flags: ToolFlag = ToolFlag.NONE, on_duplicate: DuplicateMode = "allow",
                  duplicate_scope: DuplicateScope = "name") -> Any:
    """Turn a function (or a method) into a :class:`FunctionTool`.

    Usable bare (``@function_tool``) or with arguments (``@function_tool(name="x")``).

    Args:
        f: The function, when used bare.
        name: The tool name; defaults to the function's ``__name__``.
        description: The description; defaults to the docstring's description.
        raw_schema: A ready-made schema ``{"name", "description", "parameters"}``; the
            function then receives the decoded arguments as ``raw_arguments`` (the tool is
            a :class:`RawFunctionTool`).
        flags: :class:`ToolFlag` values.
        on_duplicate: What a call does while another call of this tool (see
            ``duplicate_scope``) is still running: ``"allow"`` runs it; ``"reject"`` answers
            the LLM that the same tool is already running; ``"replace"`` cancels the running
            call(s) (which must be ``CANCELLABLE``) and runs it; ``"confirm"`` adds a
            ``lk_agents_confirm_duplicate`` parameter and rejects the call unless it is set.
        duplicate_scope: ``"name"`` (any running call of the tool) or ``"name_and_args"``
            (only one with the same validated arguments).

    Returns:
        The tool, or a decorator producing it.
    """

    def decorate(func: Callable[..., Any]) -> FunctionTool:
        if isinstance(func, FunctionTool):
            func = func.fn
        cls = RawFunctionTool if raw_schema is not None else FunctionTool
        return cls(func, name=name, description=description, raw_schema=raw_schema,
                   flags=flags, on_duplicate=on_duplicate, duplicate_scope=duplicate_scope)

    return decorate if f is None else decorate(f)


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
    """Decode the JSON arguments; they must be an object (empty text and ``null`` count as
    ``{}``; arguments encoded twice, as a JSON string, are decoded again)."""
    try:
        data = msgspec.json.decode(arguments_json.strip() or "{}")
        while isinstance(data, str):
            data = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise ToolError(f"Error parsing arguments for `{tool.name}`: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ToolError(f"Error parsing arguments for `{tool.name}`: "
                        f"expected dict from function arguments, got {type(data).__name__}")
    return data


def validated_arguments(tool: FunctionTool, data: dict[str, Any]) -> dict[str, Any]:
    """The validated arguments of a call: every LLM-visible parameter, converted to its
    declared type (a pydantic model parameter gets a model instance), omitted ones and
    ``null`` placeholders of the strict schema holding their defaults. Raw tools: ``data``.

    Raises:
        pydantic.ValidationError: The arguments do not fit the parameters.
    """
    model = tool.args_model
    if model is None:
        return data
    data = fill_defaults(data, tool.parameters_schema)
    validated = model.model_validate(data)
    return {name: getattr(validated, name) for name in type(validated).model_fields}


def parse_arguments(tool: FunctionTool, arguments_json: str) -> dict[str, Any]:
    """Decode and validate the JSON arguments of a call to ``tool``.

    Validation is pydantic's (lax: ``"5"`` is accepted for an ``int``), against the model the
    schemas were built from.

    Args:
        tool: The tool being called.
        arguments_json: The call's arguments, a JSON object.

    Returns:
        The keyword arguments for the LLM-visible parameters (see
        :func:`validated_arguments`). For raw-schema tools: ``{"raw_arguments": <object>}``.

    Raises:
        ToolError: ``Error parsing arguments for `<name>`: <detail>``; the detail names the
            offending field.
    """
    data = _decode_object(tool, arguments_json)
    if tool.args_model is None:
        return {"raw_arguments": data}
    try:
        return validated_arguments(tool, data)
    except (pydantic.ValidationError, ValueError, TypeError) as exc:
        raise ToolError(f"Error parsing arguments for `{tool.name}`: {exc}") from None


# --------------------------------------------------------------------------------------------
# Execution


@dataclasses.dataclass
class ToolResult:
    """A tool's return value with whether it asks for a reply.

    Return ``ToolResult(output, reply_required=False)`` to record ``output`` for the LLM
    without generating a reply to it (another tool of the step may still ask for one); for a
    handoff, return ``(agent, ToolResult(...))``.

    Attributes:
        output: The value shown to the LLM (as for a plain return value).
        reply_required: Whether the LLM should answer it (default True).
    """

    output: Any
    reply_required: bool = dataclasses.field(default=True, kw_only=True)


@dataclasses.dataclass(frozen=True)
class ToolOutcome:
    """What executing one function call produced.

    Attributes:
        output: The output item for the chat context (always present); its
            ``reply_required`` says whether the LLM should reply to it.
        agent: The agent to hand off to, if the tool returned one.
        exception: The unexpected exception the tool raised (not set for ``ToolError`` /
            ``StopResponse``, which are expected ways to end a tool).
    """

    output: FunctionCallOutput
    agent: Any | None = None
    exception: BaseException | None = None

    @property
    def reply_required(self) -> bool:
        return self.output.reply_required


def _never_agent(_: object) -> bool:
    return False


def _output(call: FunctionCall, text: str, *, is_error: bool = False,
            reply_required: bool = True) -> FunctionCallOutput:
    return FunctionCallOutput(call_id=call.call_id, name=call.name, output=text,
                              is_error=is_error, created_at=now(),
                              reply_required=reply_required)


def tool_error_outcome(call: FunctionCall, text: str, *, reply_required: bool = True
                       ) -> ToolOutcome:
    """An error output for ``call`` (shown to the LLM, which answers it by default)."""
    return ToolOutcome(output=_output(call, text, is_error=True,
                                      reply_required=reply_required))


CANCELLED_BY_CLOSE_OUTPUT = "the tool call was cancelled because the session closed"
CANCELLED_BY_HANDOFF_OUTPUT = ("the tool call was cancelled because another agent took over "
                               "the session")


def cancelled_outcome(call: FunctionCall, *, closing: bool) -> ToolOutcome:
    """The outcome of a call whose agent was stopped under it (the session closed, or
    another agent took over): an error output, so the history answers every call; no reply."""
    text = CANCELLED_BY_CLOSE_OUTPUT if closing else CANCELLED_BY_HANDOFF_OUTPUT
    return tool_error_outcome(call, text, reply_required=False)


_SCALARS = (str, int, float, bool, complex, type(None))


def _is_valid_output(value: object) -> bool:
    """True for str/int/float/bool/complex/None and lists/tuples/sets/dicts of those."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_is_valid_output(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, _SCALARS) and _is_valid_output(v) for k, v in value.items())
    return False


def _split_agent(value: object, is_agent: Callable[[object], bool]
                 ) -> tuple[list[object], object]:
    """Separate the agents from a return value.

    Returns:
        The agents found (the value itself, or items of a list/tuple/set) and what remains:
        a collection without agents becomes a list; with one agent, None when nothing else
        is left, the single remaining item, or a list of the remaining items.
    """
    if is_agent(value):
        return [value], None
    if not isinstance(value, (list, tuple, set, frozenset)):
        return [], value
    agents = [v for v in value if is_agent(v)]
    rest = [v for v in value if not is_agent(v)]
    if not agents:
        return [], rest
    return agents, (None if not rest else rest[0] if len(rest) == 1 else rest)


def outcome_from_value(call: FunctionCall, value: object,
                       is_agent: Callable[[Any], bool] = _never_agent) -> ToolOutcome:
    """Map a tool's return value to its outcome, as LiveKit does: the output text is
    ``str()`` of the value ("" for None); a value with nothing to say (None, a bare handoff)
    asks for no reply unless it is a :class:`ToolResult` saying otherwise. An exception
    returned (not raised; a mock's ``lambda: ToolError("…")``) is taken as raised, as
    LiveKit takes it."""
    if isinstance(value, Exception):
        return _outcome_from_exception(call, value)
    agents, rest = _split_agent(value, is_agent)
    if len(agents) > 1:
        logger.error("tool %r returned more than one agent; its output is ignored", call.name)
        return tool_error_outcome(call, MULTIPLE_AGENTS_OUTPUT)
    reply_required = rest is not None
    if isinstance(rest, ToolResult):
        reply_required, rest = rest.reply_required, rest.output
    agent = agents[0] if agents else None
    if not _is_valid_output(rest):
        logger.error("tool %r returned an invalid output", call.name,
                     extra={"call_id": call.call_id})
        return ToolOutcome(output=_output(call, INVALID_OUTPUT, is_error=True,
                                          reply_required=reply_required), agent=agent)
    text = "" if rest is None else str(rest)
    return ToolOutcome(output=_output(call, text, reply_required=reply_required), agent=agent)


def _outcome_from_exception(call: FunctionCall, exc: Exception) -> ToolOutcome:
    """Map an exception raised (or returned) by a tool to its outcome."""
    leaf = single_leaf(exc)
    if isinstance(leaf, ToolError):
        return tool_error_outcome(call, leaf.message)
    if isinstance(leaf, StopResponse):  # silence, but the call is still answered
        return ToolOutcome(output=_output(call, "", reply_required=False))
    logger.error("exception occurred while executing tool %r", call.name, exc_info=exc,
                 extra={"function": call.name, "call_id": call.call_id})
    return ToolOutcome(output=_output(call, INTERNAL_ERROR_OUTPUT, is_error=True),
                       exception=exc)


async def execute_function_call(
        call: FunctionCall, tools: Mapping[str, FunctionTool], *,
        make_context: Callable[[FunctionCall], ToolContext] | None = None,
        is_agent: Callable[[Any], bool] = _never_agent,
        mock: Callable[..., Any] | None = None) -> ToolOutcome:
    """Run one function call and map its result to a :class:`ToolOutcome`.

    Args:
        call: The call the LLM made.
        tools: The available tools by name (the order is used in the unknown-function
            message).
        make_context: Builds the ``RunContext`` passed to the tool's context parameter(s);
            when None such parameters receive None.
        is_agent: Tells whether a returned value is an Agent (a handoff).
        mock: Runs instead of the tool, with the arguments it declares (``mock_tools``).

    Returns:
        The outcome; it always carries an output (created at the time the tool returned).

    Raises:
        trio.Cancelled: And any other non-``Exception`` BaseException, never swallowed.

    Cancellation: cancels the tool; nothing is returned (the caller records the call as
    cancelled).
    """
    tool = tools.get(call.name)
    if tool is None:
        return tool_error_outcome(call, f"Unknown function: {call.name} - available tools: "
                            f"{', '.join(tools)}")
    try:
        kwargs = parse_arguments(tool, call.arguments)
    except ToolError as exc:
        return tool_error_outcome(call, exc.message)
    if tool.context_params:
        context = make_context(call) if make_context is not None else None
        kwargs.update(dict.fromkeys(tool.context_params, context))
    try:
        value = await (tool(**kwargs) if mock is None else run_mock(mock, kwargs))
    except Exception as exc:
        return _outcome_from_exception(call, exc)
    return outcome_from_value(call, value, is_agent)
