"""ToolRegistry: the tools every turn may use, by name.

Built once at start-up and never changed afterwards: per-call tools (memory_write, cron
tools) are passed to `AgentLoop.run(..., extra_tools=...)` instead, so concurrent sessions
cannot see each other's tools.
"""

from __future__ import annotations

from collections.abc import Iterable

from squidd.core.models import ToolDefinition
from squidd.core.ports import Tool


def definition_of(tool: Tool) -> ToolDefinition:
    return ToolDefinition(
        name=tool.name, description=tool.description, parameters=dict(tool.parameters)
    )


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def definitions(self) -> list[ToolDefinition]:
        return [definition_of(tool) for tool in self._tools.values()]
