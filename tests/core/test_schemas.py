"""The tool schemas a turn offers are made once per agent and change (core/tool_calls.py
`Schemas`): the same tool's schema is not rebuilt or re-measured on every turn, a changed
one (an MCP server's new listing, a new description) is offered as it is now, and the size
the budget reserves is the size of what is sent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squidd.core.estimator import tools_chars
from squidd.core.models import ToolResult
from squidd.core.tool_calls import Schemas, offer

SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}


class Lookup:
    """A per-call tool made anew each turn, its schema its class's."""

    name = "lookup"
    parameters = SCHEMA

    def __init__(self, description: str = "Look something up.") -> None:
        self.description = description

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(content="found")


def test_a_tool_made_anew_each_turn_is_offered_from_the_kept_schema() -> None:
    schemas = Schemas()
    first = offer({"lookup": Lookup()}, (), schemas)
    second = offer({"lookup": Lookup()}, (), schemas)
    assert second[0] is first[0]
    assert schemas.chars(second) == tools_chars(second)


def test_a_changed_schema_or_description_is_offered_as_it_is_now() -> None:
    schemas = Schemas()
    offer({"lookup": Lookup()}, (), schemas)
    described = offer({"lookup": Lookup("Find a fact.")}, (), schemas)[0]
    assert described.description == "Find a fact."
    relisted = Lookup()
    relisted.parameters = {"type": "object", "properties": {"id": {"type": "integer"}}}
    changed = offer({"lookup": relisted}, (), schemas)
    assert changed[0].parameters == relisted.parameters
    assert schemas.chars(changed) == tools_chars(changed)
