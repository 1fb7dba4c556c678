"""Every built-in tool is declared once (tools/declared.py): name, effect and argument model
in its class statement; the schema the model sees and the checks come from that model."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from pydantic import Field

import squidd.tools
from squidd.core.journal import Effect
from squidd.errors import ToolError
from squidd.tools.arguments import Arguments, schema_of
from squidd.tools.declared import Declared


def _builtin_tools() -> list[type[Declared[Arguments]]]:
    found: dict[str, type[Declared[Arguments]]] = {}
    for info in pkgutil.iter_modules(squidd.tools.__path__, "squidd.tools."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Declared) and cls.name:
                found[cls.name] = cls
    return list(found.values())


def test_every_builtin_tool_is_declared_with_its_schema_from_its_argument_model() -> None:
    tools = _builtin_tools()
    names = {tool.name for tool in tools}
    assert {"shell", "read_file", "cron_add", "memory_write", "web_fetch", "spawn"} <= names
    assert len(tools) >= 16
    for tool in tools:
        assert tool.arguments is not Arguments, tool.name
        assert tool.parameters == schema_of(tool.arguments), tool.name
        assert isinstance(tool.effect, Effect), tool.name


def test_a_tool_without_an_effect_is_refused_at_declaration() -> None:
    class Args(Arguments):
        text: str = Field(description="some text")

    with pytest.raises(TypeError, match="no effect"):

        class Bad(Declared[Args], name="bad"):
            description = "never declared"

    class Good(Declared[Args], name="good", effect=Effect.READ_ONLY):
        description = "echoes"

    assert Good.parameters["properties"]["text"]["type"] == "string"
    assert Good().parse({"text": "hi"}) == Args(text="hi")
    with pytest.raises(ToolError, match="text"):
        Good().parse({"text": 5})
