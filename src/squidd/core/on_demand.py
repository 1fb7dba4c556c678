"""Tools offered on demand: their schemas are sent only after the model asks for them.

Every tool schema costs input tokens on every call of every turn, used or not; a set of
rarely used tools (cron, and later MCP servers, skills, spawn) can cost more than the whole
conversation. Tools whose names match `tools.on_demand` are not sent; in their place the
model gets one small `load_tools` tool whose description lists them by name, one short line
each. Calling `load_tools` adds their full schemas for the rest of the turn. A call to an
on-demand tool by name without loading it first still runs: nothing is refused, only not
advertised.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from squidd.core.models import ToolDefinition, ToolResult
from squidd.core.ports import Tool
from squidd.core.tools import definition_of
from squidd.errors import ToolError

LOAD_TOOLS = "load_tools"
_LINE_CHARS = 70


def on_demand(name: str, patterns: Sequence[str]) -> bool:
    return name != LOAD_TOOLS and any(fnmatchcase(name, p) for p in patterns)


def _first_line(text: str) -> str:
    line = text.strip().split(". ")[0].splitlines()[0] if text.strip() else ""
    return line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…"


class LoadTools:
    """The one tool that stands in for the on-demand ones during a turn."""

    name = LOAD_TOOLS
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "items": {"type": "string"},
                "description": "tool names from the list (globs like cron_* work)",
            }
        },
        "required": ["names"],
        "additionalProperties": False,
    }

    def __init__(self, tools: Sequence[Tool], offer: Callable[[ToolDefinition], None]) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._offer = offer
        self._loaded: set[str] = set()

    @property
    def description(self) -> str:
        lines = "; ".join(
            f"{name}: {_first_line(tool.description)}" for name, tool in self._tools.items()
        )
        return f"Load more tools for this turn before using them. Available: {lines}."

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        names = arguments.get("names")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ToolError("names must be a list of tool names")
        chosen = [
            name for name in self._tools if any(fnmatchcase(name, pattern) for pattern in names)
        ]
        if not chosen:
            known = ", ".join(self._tools)
            raise ToolError(f"no tool matches {names}; available: {known}")
        for name in chosen:
            if name not in self._loaded:
                self._loaded.add(name)
                self._offer(definition_of(self._tools[name]))
        return ToolResult(f"loaded: {', '.join(chosen)}; call them now as needed")
