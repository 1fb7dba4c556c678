"""Input schemas of MCP tools: local `$ref`s inlined, what the model APIs reject refused."""

from __future__ import annotations

import pytest

from squidd.tools.mcp.schema import SchemaRejectedError, sanitize_schema


def test_local_refs_are_inlined_and_defs_removed() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"when": {"$ref": "#/$defs/time", "description": "start"}},
        "$defs": {"time": {"type": "string", "format": "date-time"}},
    }
    assert sanitize_schema(schema) == {
        "type": "object",
        "properties": {"when": {"type": "string", "format": "date-time", "description": "start"}},
    }


def test_a_missing_schema_is_an_empty_object() -> None:
    assert sanitize_schema(None) == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (
            {
                "$ref": "#/$defs/a",
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            },
            "$ref cycle",
        ),
        (
            {"type": "object", "properties": {"x": {"$ref": "https://example.org/s.json"}}},
            "not local",
        ),
        ({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}, "points nowhere"),
        ({"type": "array", "items": {}}, "must describe an object"),
        ({"type": "object", "properties": {"x": {"type": "text"}}}, "not a JSON type"),
        ({"type": "object", "required": "x"}, "'required'"),
        (
            {
                "type": "object",
                "properties": {f"p{i}": {"description": "d" * 100} for i in range(1000)},
            },
            "cap",
        ),
    ],
)
def test_schemas_the_model_apis_reject_are_refused(schema: dict, reason: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SchemaRejectedError, match=reason.replace("$", r"\$")):
        sanitize_schema(schema)
