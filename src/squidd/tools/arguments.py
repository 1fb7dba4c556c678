"""Tool arguments declared once: each tool's arguments are a pydantic model, from which the
JSON schema the model sees is made (`schema_of`) and by which the arguments it sends are
checked (`parse`), so the schema and the checks cannot drift apart.

The models are strict (`"5"` is no integer, `true` no 1) and refuse unknown keys, as the
schemas say (`additionalProperties: false`). The schema is pydantic's, trimmed to what the
model needs: no titles, no defaults (the descriptions say them), an optional field as its
plain type; each token of it is sent with every request. A refusal is a `ToolError` whose
message names the argument in words the model can act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from squidd.errors import ToolError

__all__ = ["Arguments", "parse", "schema_of"]


class Arguments(BaseModel):
    """Base of every tool's arguments."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


A = TypeVar("A", bound=Arguments)


def schema_of(model: type[Arguments]) -> dict[str, Any]:
    """The JSON schema of `model` as the tool's `parameters`."""
    schema: dict[str, Any] = _trim(model.model_json_schema())
    schema.pop("description", None)  # the model's docstring: for readers; the tool says its own
    schema.setdefault("properties", {})
    return schema


def _trim(node: Any) -> Any:
    if isinstance(node, list):
        return [_trim(item) for item in node]
    if not isinstance(node, dict):
        return node
    branches = node.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        if len(rest) == 1:  # `X | None = None`: optional already, so just X
            merged = {**{k: v for k, v in node.items() if k != "anyOf"}, **rest[0]}
            return _trim(merged)
    return {key: _trim(value) for key, value in node.items() if key not in ("title", "default")}


def parse(model: type[A], arguments: Mapping[str, Any]) -> A:
    """The arguments as `model`; a `ToolError` saying what is wrong when they do not fit."""
    try:
        return model.model_validate(dict(arguments))
    except ValidationError as exc:
        raise ToolError("; ".join(_said(error) for error in exc.errors())) from None


def _said(error: Any) -> str:
    name = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    messages = {
        "missing": f"{name} is required",
        "extra_forbidden": f"there is no argument {name!r}",
        "string_type": f"{name} must be a string",
        "int_type": f"{name} must be a whole number",
        "bool_type": f"{name} must be true or false",
        "greater_than_equal": f"{name} must be >= {ctx.get('ge')}",
        "less_than_equal": f"{name} must be <= {ctx.get('le')}",
        "string_too_long": f"{name} is too long ({ctx.get('max_length')} characters at most)",
        "string_too_short": f"{name} must not be empty"
        if ctx.get("min_length") == 1
        else f"{name} needs at least {ctx.get('min_length')} characters",
    }
    return messages.get(kind, f"{name}: {error.get('msg', 'invalid')}")
