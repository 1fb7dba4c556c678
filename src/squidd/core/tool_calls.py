"""A turn's tools and the running of one tool call.

`tools_for` is the set a turn may use: the registry's tools, then the per-call
`extra_tools` (document 000: they win over registry tools of the same name, for this call
only, and the registry is never changed), filtered by the tool policy. `offer` is the list of
schemas sent to the model (on-demand tools behind `load_tools`, core/on_demand.py).
`dispatch` runs one call: a tool that fails or gets bad arguments becomes an error result the
model sees; it never escapes the turn. `cap_result` cuts a long result as it enters the
history and keeps the whole text in a file the note names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from squidd.core.estimator import tools_chars
from squidd.core.models import SessionId, ToolCall, ToolDefinition, ToolResult
from squidd.core.on_demand import LoadTools, on_demand
from squidd.core.ports import ResultStore, Tool, ToolPolicy
from squidd.core.tools import ToolRegistry, definition_of
from squidd.errors import ToolError

log = structlog.get_logger()

DEFAULT_MAX_RESULT_CHARS = 16_000


def tools_for(
    registry: ToolRegistry,
    policy: ToolPolicy | None,
    session: SessionId,
    channel: str,
    extra_tools: Sequence[Tool],
) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    for tool in registry.tools():
        tools[tool.name] = tool
    # Per-call tools win over registry tools of the same name (dispatched first).
    for tool in extra_tools:
        tools[tool.name] = tool
    if policy is not None:
        tools = {
            name: tool for name, tool in tools.items() if policy.allows(name, channel, session)
        }
    return tools


class Schemas:
    """Each tool's schema as offered, and its size, kept per tool name while the tool's
    schema is the same object and its description the same text (a declared tool's schema
    is its class's, tools/declared.py): made once per agent and change, not on every turn,
    though per-call tools are new objects each turn. Bounded by the tools' names."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[Mapping[str, Any], str, ToolDefinition, int]] = {}

    def definition(self, tool: Tool) -> ToolDefinition:
        parameters, description = tool.parameters, tool.description
        kept = self._kept.get(tool.name)
        if kept is not None and kept[0] is parameters and kept[1] == description:
            return kept[2]
        made = definition_of(tool)
        self._kept[tool.name] = (parameters, description, made, tools_chars([made]))
        return made

    def chars(self, definitions: Sequence[ToolDefinition]) -> int:
        """`core.estimator.tools_chars` of `definitions`, from the kept sizes where known."""
        total = 0
        for made in definitions:
            kept = self._kept.get(made.name)
            total += kept[3] if kept is not None and kept[2] is made else tools_chars([made])
        return total


def offer(
    tools: dict[str, Tool], lazy: Sequence[str], schemas: Schemas | None = None
) -> list[ToolDefinition]:
    """The schemas sent: all tools but the on-demand ones, which `load_tools` stands in for
    (and adds to this same list when the model asks); `tools` gains the loader. `schemas`
    keeps them between turns."""
    define = definition_of if schemas is None else schemas.definition
    later = [tool for name, tool in tools.items() if on_demand(name, lazy)]
    definitions = [define(tool) for name, tool in tools.items() if not on_demand(name, lazy)]
    if later:
        loader = LoadTools(later, definitions.append)
        tools[loader.name] = loader
        definitions.append(definition_of(loader))
    return definitions


def _decode_arguments(call: ToolCall) -> dict[str, Any]:
    raw = call.arguments.strip() or "{}"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ToolError(
            f"the arguments for {call.name} are not valid JSON ({exc.msg} at position "
            f"{exc.pos}); send a JSON object matching the tool's parameters"
        ) from None
    if not isinstance(value, dict):
        raise ToolError(f"the arguments for {call.name} must be a JSON object")
    return value


async def dispatch(call: ToolCall, tools: Mapping[str, Tool]) -> ToolResult:
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return ToolResult(f"unknown tool {call.name!r}; available: {known}", is_error=True)
    try:
        arguments = _decode_arguments(call)
        return await tool.execute(arguments)
    except ToolError as exc:
        return ToolResult(str(exc), is_error=True)
    except Exception as exc:  # a broken tool must not end the turn
        log.exception("tool_crashed", tool=call.name)
        return ToolResult(f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)


async def cap_result(
    results: ResultStore | None, cap: int, session: SessionId, call: ToolCall, content: str
) -> str:
    """`content` as it enters the history: cut to `cap` characters, the whole text kept in a
    file that the note names (so the model can read on with read_file)."""
    if len(content) <= cap:
        return content
    head = content[:cap]
    if results is None:
        return f"{head}\n[result cut: {len(content)} characters in all, the first {cap} shown]"
    name = await results.save(session, call.id, content)
    log.info("tool_result_saved", tool=call.name, chars=len(content), file=name)
    return (
        f"{head}\n[result cut: {len(content)} characters in all, the first {cap} shown. "
        f"The whole text is in the file {name}; read more with read_file "
        f'(path="{name}", offset={cap}, limit={cap}).]'
    )
