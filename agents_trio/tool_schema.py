"""The JSON schemas of a function tool's arguments, as LiveKit Agents builds them.

A tool's LLM-visible parameters become a pydantic model (``<CamelName>Args``): each parameter
keeps its annotation, its ``Annotated[..., Field(...)]`` metadata (constraints, descriptions,
``json_schema_extra``), its default, and the description of its Google/ReST/NumPy-style
docstring entry. From that model come two schemas:

- the *legacy* one, pydantic's own JSON schema of the model (titles, defaults and ``$defs``
  included);
- the *strict* one, the dialect OpenAI's strict function calling accepts: every object closed
  (``additionalProperties: false``) with all its properties required, no titles, no defaults
  (a defaulted field also accepts ``null``, meaning "use the default"), ``$ref`` siblings
  inlined, ``oneOf`` turned into ``anyOf`` and two-way nullable unions folded into a ``type``
  list.

:func:`fill_defaults` undoes the strict dialect's ``null`` placeholders before validation.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import docstring_parser
from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = ["arguments_model", "docstring_summary", "fill_defaults", "strict_json_schema"]

JsonSchema = dict[str, Any]


def docstring_summary(fn: Callable[..., Any]) -> tuple[str | None, dict[str, str | None]]:
    """The description of ``fn``'s docstring (short and long parts, line breaks kept) and
    the description of each parameter it documents."""
    parsed = docstring_parser.parse(fn.__doc__ or "")
    return parsed.description, {p.arg_name: p.description for p in parsed.params}


def model_name(fn: Callable[..., Any]) -> str:
    """``get_weather`` -> ``GetWeatherArgs`` (the model's, hence the schema's, title)."""
    return "".join(part.capitalize() for part in fn.__name__.split("_")) + "Args"


def arguments_model(name: str, params: Iterable[inspect.Parameter],
                    hints: Mapping[str, Any], docs: Mapping[str, str | None]
                    ) -> type[BaseModel]:
    """The pydantic model of the LLM-visible parameters ``params``.

    Args:
        name: The model's name.
        params: The parameters, in order (context parameters already left out).
        hints: Their resolved annotations (a missing one counts as ``Any``).
        docs: Per-parameter docstring descriptions, used where ``Field`` gives none.

    Raises:
        pydantic.errors.PydanticSchemaGenerationError: A parameter's type has no schema.
    """
    fields: dict[str, Any] = {}
    for param in params:
        info = FieldInfo.from_annotation(hints.get(param.name, Any))
        if param.default is not inspect.Parameter.empty and info.default is PydanticUndefined:
            info.default = param.default
        if info.description is None:
            info.description = docs.get(param.name)
        fields[param.name] = (info.annotation, info)
    model: type[BaseModel] = create_model(name, **fields)
    return model


# --------------------------------------------------------------------------------------------
# The strict dialect


def strict_json_schema(schema: JsonSchema, *, null_for_defaults: bool = True) -> JsonSchema:
    """Rewrite ``schema`` (in place, and returned) into OpenAI's strict dialect.

    Args:
        schema: A model's JSON schema; its ``$defs`` are rewritten too.
        null_for_defaults: A defaulted field also accepts ``null`` (its default stands in
            for it: see :func:`fill_defaults`).
    """
    return _Strict(schema, null_for_defaults).rewrite(schema)


_NULL: JsonSchema = {"type": "null"}


class _Strict:
    """One rewrite of a schema: ``root`` resolves the ``$ref`` pointers met on the way."""

    def __init__(self, root: JsonSchema, null_for_defaults: bool) -> None:
        self.root = root
        self.null_for_defaults = null_for_defaults

    def rewrite(self, node: object) -> JsonSchema:
        if not isinstance(node, dict):
            raise TypeError(f"expected a JSON schema object, got {node!r}")
        for key in ("$defs", "definitions"):  # rewritten where they are
            table = node.get(key)
            if isinstance(table, dict):
                for sub in table.values():
                    self.rewrite(sub)
        self._close_object(node)
        if isinstance(node.get("items"), dict):
            node["items"] = self.rewrite(node["items"])
        for key in ("anyOf", "oneOf"):
            self._flatten_union(node, key)
        self._flatten_all_of(node)
        node.pop("title", None)
        node.pop("discriminator", None)
        if "default" in node:
            del node["default"]
            if self.null_for_defaults:
                _accept_null(node)
        ref = node.get("$ref")
        if ref and len(node) > 1:  # a $ref may not have siblings: inline its target
            assert isinstance(ref, str)
            target = resolve_ref(self.root, ref)
            merged = {**target, **node}
            node.update(merged)
            del node["$ref"]
            return self.rewrite(node)
        return _fold_nullable(node)

    def _close_object(self, node: JsonSchema) -> None:
        if node.get("type") == "object" and "additionalProperties" not in node:
            node["additionalProperties"] = False
        props = node.get("properties")
        if isinstance(props, dict) and props:
            node["required"] = list(props)
            node["properties"] = {k: self.rewrite(v) for k, v in props.items()}

    def _flatten_union(self, node: JsonSchema, key: str) -> None:
        variants = node.get(key)
        if not isinstance(variants, list):
            return
        kept = [v for v in variants if v != {}]  # `{}` matches anything; strict refuses it
        if len(kept) == 1:
            node.update(self.rewrite(kept[0]))
            node.pop(key, None)
        elif kept:
            node.pop(key, None)
            node["anyOf"] = [self.rewrite(v) for v in kept]
        else:
            node.pop(key, None)

    def _flatten_all_of(self, node: JsonSchema) -> None:
        parts = node.get("allOf")
        if not isinstance(parts, list):
            return
        if len(parts) == 1:
            node.update(self.rewrite(parts[0]))
            del node["allOf"]
        else:
            node["allOf"] = [self.rewrite(p) for p in parts]


def _fold_nullable(node: JsonSchema) -> JsonSchema:
    """``anyOf: [X, null]`` -> X with ``"null"`` added to its type (and enum)."""
    for key in ("anyOf", "oneOf"):
        variants = node.get(key)
        if not (isinstance(variants, list) and len(variants) == 2 and _NULL in variants):
            continue
        other = next((v for v in variants if v != _NULL), None)
        assert isinstance(other, dict)
        if "type" not in other or "const" in other:
            continue
        if isinstance(other["type"], str):
            other["type"] = [other["type"], "null"]
        if isinstance(other.get("enum"), list):
            other["enum"] = [*other["enum"], None]
        return {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")} | other
    return node


def _accept_null(node: JsonSchema) -> None:
    """Let a defaulted field also take ``null``, keeping its own constraints."""
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind) or "const" in node:
        return
    for key in ("anyOf", "oneOf"):
        variants = node.get(key)
        if isinstance(variants, list):
            if _NULL not in variants:
                variants.append({"type": "null"})
            return
    if "enum" not in node and isinstance(kind, (str, list)):
        node["type"] = [kind, "null"] if isinstance(kind, str) else [*kind, "null"]
        return
    if not node:  # the empty schema accepts null already
        return
    inner = dict(node)
    node.clear()
    if "$ref" in inner and len(inner) > 1:
        node.update(inner)  # the siblings stay beside the union, the ref goes in it
        node["anyOf"] = [{"$ref": node.pop("$ref")}, {"type": "null"}]
    else:
        node["anyOf"] = [inner, {"type": "null"}]


def resolve_ref(root: JsonSchema, ref: str) -> JsonSchema:
    """The schema a local ``#/...`` pointer names."""
    if not ref.startswith("#/"):
        raise ValueError(f"unsupported $ref {ref!r}: only local '#/' pointers are")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
        if not isinstance(node, dict):
            raise ValueError(f"$ref {ref!r} does not name a schema object")
    return node  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# Reading arguments written against the strict dialect


def fill_defaults(value: Any, schema: JsonSchema) -> Any:  # noqa: ANN401 - JSON
    """``value`` with each ``null`` standing for a default (where the legacy ``schema`` has a
    default and does not itself accept null) replaced by a copy of that default, at any
    depth (nested models, lists, unions)."""
    return _fill(value, schema, schema)


def _fill(value: Any, schema: JsonSchema, root: JsonSchema) -> Any:  # noqa: ANN401 - JSON
    schema = _with_ref(schema, root)
    if value is None:
        if "default" in schema and not _allows_null(schema, root, frozenset()):
            return copy.deepcopy(schema["default"])
        return None
    for part in schema.get("allOf") or ():
        if isinstance(part, dict):
            value = _fill(value, part, root)
    for key in ("anyOf", "oneOf"):
        for variant in schema.get(key) or ():
            if isinstance(variant, dict) and _matches(value, variant, root):
                return _fill(value, variant, root)
    if isinstance(value, dict):
        return _fill_object(value, schema, root)
    if isinstance(value, list):
        return _fill_array(value, schema, root)
    return value


def _fill_object(value: dict[str, Any], schema: JsonSchema, root: JsonSchema) -> Any:  # noqa: ANN401
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    props = props if isinstance(props, dict) else None
    extra = extra if isinstance(extra, dict) else None
    if props is None and extra is None:
        return value
    out = {}
    for key, item in value.items():
        sub = props.get(key) if props is not None else None
        sub = sub if isinstance(sub, dict) else extra
        out[key] = _fill(item, sub, root) if sub is not None else item
    return out


def _fill_array(value: list[Any], schema: JsonSchema, root: JsonSchema) -> Any:  # noqa: ANN401
    prefix = schema.get("prefixItems")
    items = schema.get("items")
    prefix = prefix if isinstance(prefix, list) else None
    items = items if isinstance(items, dict) else None
    if prefix is None and items is None:
        return value
    out = []
    for i, item in enumerate(value):
        sub = prefix[i] if prefix is not None and i < len(prefix) else None
        sub = sub if isinstance(sub, dict) else items
        out.append(_fill(item, sub, root) if sub is not None else item)
    return out


def _with_ref(schema: JsonSchema, root: JsonSchema) -> JsonSchema:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = resolve_ref(root, ref)
        return {**target, **schema}
    return schema


def _allows_null(schema: JsonSchema, root: JsonSchema, seen: frozenset[str]) -> bool:
    """Whether ``null`` satisfies every constraint of ``schema``."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref in seen or not _allows_null(resolve_ref(root, ref), root, seen | {ref}):
            return False
    kind = schema.get("type")
    if (isinstance(kind, str) and kind != "null") or (isinstance(kind, list)
                                                      and "null" not in kind):
        return False
    if schema.get("const") is not None and "const" in schema:
        return False
    enum = schema.get("enum")
    if isinstance(enum, list) and None not in enum:
        return False
    parts = [p for p in schema.get("allOf") or () if isinstance(p, dict)]
    if not all(_allows_null(p, root, seen) for p in parts):
        return False
    for key in ("anyOf", "oneOf"):
        variants = schema.get(key)
        if isinstance(variants, list) and not any(
                isinstance(v, dict) and _allows_null(v, root, seen) for v in variants):
            return False
    return True


def _matches(value: object, schema: JsonSchema, root: JsonSchema) -> bool:
    """A shallow check that ``value`` fits ``schema`` (enough to pick a union's variant)."""
    schema = _with_ref(schema, root)
    if value is None and "default" in schema and not _allows_null(schema, root, frozenset()):
        return True
    if "const" in schema and value != schema["const"]:
        return False
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        return False
    kind = schema.get("type")
    if isinstance(kind, list):
        return any(_is_json_type(value, k) for k in kind if isinstance(k, str))
    if isinstance(kind, str) and not _is_json_type(value, kind):
        return False
    if isinstance(value, dict):
        required = schema.get("required")
        if isinstance(required, list) and any(k not in value for k in required):
            return False
        props = schema.get("properties")
        if isinstance(props, dict):
            closed = schema.get("additionalProperties") in (None, False)
            if closed and any(k not in props for k in value):
                return False
            return all(not isinstance(props.get(k), dict) or _matches(v, props[k], root)
                       for k, v in value.items())
    return True


def _is_json_type(value: object, kind: str) -> bool:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    checks: dict[str, bool] = {
        "null": value is None, "object": isinstance(value, dict),
        "array": isinstance(value, list), "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": numeric, "string": isinstance(value, str)}
    return checks.get(kind, True)
