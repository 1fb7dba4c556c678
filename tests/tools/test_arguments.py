"""Tool arguments declared once: the schema a tool shows the model is made from its pydantic
model, and what the model validates is what the schema says (checked here against a JSON
Schema validator on the same inputs), so the two cannot drift; refusals name the argument."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from squidd.errors import ToolError
from squidd.tools.arguments import Arguments, parse, schema_of
from squidd.tools.cron import CronAddArguments, CronRemoveArguments, NoArguments
from squidd.tools.files import EditArguments, ListArguments, ReadArguments, WriteArguments
from squidd.tools.memory_write import MemoryWriteArguments
from squidd.tools.search_history import SearchArguments
from squidd.tools.send_file import SendFileArguments
from squidd.tools.shell import ShellArguments
from squidd.tools.skills import ReadSkillArguments
from squidd.tools.spawn import SpawnArguments
from squidd.tools.web_fetch import WebFetchArguments
from squidd.tools.web_search import WebSearchArguments

MODELS: list[type[Arguments]] = [
    ReadArguments,
    WriteArguments,
    EditArguments,
    ListArguments,
    SearchArguments,
    WebSearchArguments,
    SendFileArguments,
    SpawnArguments,
    ShellArguments,
    WebFetchArguments,
    ReadSkillArguments,
    MemoryWriteArguments,
    CronAddArguments,
    CronRemoveArguments,
    NoArguments,
]

# Inputs a model might send: right, wrong type, missing, unknown key, out of range, empty.
SAMPLES: list[dict[str, Any]] = [
    {},
    {"path": "notes/a.md"},
    {"path": "a", "offset": 3, "limit": 10},
    {"path": "a", "offset": -1},
    {"path": "a", "limit": 0},
    {"path": "a", "limit": "10"},
    {"path": "a", "limit": True},
    {"path": 5},
    {"path": "a", "content": "text"},
    {"path": "a", "old_text": "x", "new_text": "y"},
    {"path": "a", "old_text": "", "new_text": "y"},
    {"path": "a", "name": "report.pdf"},
    {"path": "a", "surprise": 1},
    {"query": "words"},
    {"query": "words", "limit": 50},
    {"query": "words", "limit": 51},
    {"query": "words", "count": 20},
    {"query": "words", "count": 21},
    {"query": ""},
    {"query": "q" * 501},
    {"task": "do it"},
    {"task": "do it", "wait": False},
    {"task": "do it", "wait": "no"},
    {"task": ""},
    {"command": "ls -l"},
    {"command": ["ls"]},
    {"url": "https://example.org"},
    {"name": "recipe"},
    {"name": ""},
    {"name": 3},
    {"content": "# Memory"},
    {"name": "tea", "prompt": "drink tea", "every": "2h"},
    {"name": "tea", "prompt": "drink tea", "every": 2},
    {"name": "tea", "prompt": "drink tea", "cron": "", "at": "", "target": ""},
]


def _accepted_by_schema(schema: dict[str, Any], sample: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(sample, schema)
    except jsonschema.ValidationError:
        return False
    return True


def _accepted_by_model(model: type[Arguments], sample: dict[str, Any]) -> bool:
    try:
        parse(model, sample)
    except ToolError:
        return False
    return True


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_the_schema_and_the_checks_say_the_same(model: type[Arguments]) -> None:
    schema = schema_of(model)
    jsonschema.Draft202012Validator.check_schema(schema)
    for sample in SAMPLES:
        assert _accepted_by_model(model, sample) == _accepted_by_schema(schema, sample), sample


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_the_schema_carries_nothing_the_model_does_not_need(model: type[Arguments]) -> None:
    text = json.dumps(schema_of(model))
    assert '"title"' not in text and '"default"' not in text and '"anyOf"' not in text
    assert schema_of(model)["additionalProperties"] is False


@pytest.mark.parametrize(
    ("model", "sample", "said"),
    [
        (SearchArguments, {"query": "x", "limit": 0}, "limit must be >= 1"),
        (SearchArguments, {"query": "   "}, "query must not be empty"),
        (SearchArguments, {}, "query is required"),
        (SpawnArguments, {"task": "x", "wait": "no"}, "wait must be true or false"),
        (SpawnArguments, {"task": "x", "when": 1}, "there is no argument 'when'"),
        (ReadArguments, {"path": "a", "limit": "10"}, "limit must be a whole number"),
        (WebSearchArguments, {"query": "q" * 401}, "query is too long (400 characters at most)"),
    ],
)
def test_a_refusal_names_the_argument(
    model: type[Arguments], sample: dict[str, Any], said: str
) -> None:
    with pytest.raises(ToolError) as info:
        parse(model, sample)
    assert str(info.value) == said


def test_values_arrive_typed_and_trimmed() -> None:
    args = parse(SearchArguments, {"query": "  two words  "})
    assert args.query == "two words" and args.limit is None
    assert parse(SpawnArguments, {"task": "t"}).wait is True
    assert parse(ListArguments, {}).path == "."


def test_no_tool_module_writes_its_schema_by_hand() -> None:
    """Every built-in tool's `parameters` comes from its Arguments model (`schema_of`); the
    MCP tools take theirs from their servers, the core's load_tools imports no pydantic."""
    import ast
    from pathlib import Path

    import squidd.tools

    root = Path(squidd.tools.__file__).parent
    by_hand: list[str] = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.AnnAssign | ast.Assign)
                and "parameters" in ast.unparse(node).split("=")[0]
                and isinstance(node.value, ast.Dict)
                and node.value.keys  # the empty placeholder of a base class is no schema
            ):
                by_hand.append(f"{path.name}:{node.lineno}")
    assert by_hand == []
