"""Input schemas of MCP tools, made acceptable to the model APIs or refused.

A server's `inputSchema` goes to the model as the tool's `parameters`. The chat APIs reject a
schema whose top level is not an object, `$ref`s they cannot resolve, and (several of them)
recursive ones; one such tool would make every request of the turn fail. So local `$ref`s
are inlined, a `$ref` cycle, a remote `$ref` or a malformed keyword refuses the tool (the
caller logs it and drops that tool only), and the result is capped in size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_SCHEMA_CHARS", "SchemaRejectedError", "sanitize_schema"]

MAX_SCHEMA_CHARS = 64 * 1024
_MAX_DEPTH = 32
_JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})


class SchemaRejectedError(ValueError):
    """The schema cannot be offered to the model; the message says why."""


def _resolve_pointer(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise SchemaRejectedError(f"$ref {ref!r} is not local to the schema")
    node: Any = root
    for part in ref[2:].split("/"):
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or key not in node:
            raise SchemaRejectedError(f"$ref {ref!r} points nowhere")
        node = node[key]
    return node


def _inline(node: Any, root: Mapping[str, Any], seen: tuple[str, ...], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise SchemaRejectedError(f"nested deeper than {_MAX_DEPTH} levels")
    if isinstance(node, list):
        return [_inline(item, root, seen, depth + 1) for item in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            raise SchemaRejectedError(f"$ref cycle through {ref!r}")
        target = _inline(_resolve_pointer(root, ref), root, (*seen, ref), depth + 1)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if not siblings:
            return target
        if not isinstance(target, Mapping):
            raise SchemaRejectedError(f"$ref {ref!r} is not a schema")
        return {**target, **_inline(siblings, root, seen, depth + 1)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$defs", "definitions", "$schema", "$id"):
            continue  # inlined where used; ids and dialects mean nothing to the model APIs
        out[str(key)] = _inline(value, root, seen, depth + 1)
    _check_keywords(out)
    return out


def _check_keywords(node: Mapping[str, Any]) -> None:
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    for item in kinds:
        if item not in _JSON_TYPES:
            raise SchemaRejectedError(f"'type' {item!r} is not a JSON type")
    properties = node.get("properties")
    if properties is not None and (
        not isinstance(properties, Mapping)
        or not all(isinstance(v, Mapping | bool) for v in properties.values())
    ):
        raise SchemaRejectedError("'properties' must map names to schemas")
    required = node.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(v, str) for v in required)
    ):
        raise SchemaRejectedError("'required' must be a list of names")


def sanitize_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The schema to offer to the model; raises `SchemaRejectedError` saying why not."""
    if schema is None:
        return {"type": "object", "properties": {}}
    if not isinstance(schema, Mapping):
        raise SchemaRejectedError("the input schema is not a JSON object")
    result: dict[str, Any] = _inline(schema, schema, (), 0)
    if result.get("type", "object") != "object":
        raise SchemaRejectedError("the input schema must describe an object")
    result["type"] = "object"
    result.setdefault("properties", {})
    try:
        size = len(json.dumps(result))
    except (TypeError, ValueError) as exc:
        raise SchemaRejectedError(f"not JSON: {exc}") from None
    if size > MAX_SCHEMA_CHARS:
        raise SchemaRejectedError(f"{size} characters once inlined (cap {MAX_SCHEMA_CHARS})")
    return result
