"""The audit log: one hash-chained line per tool call, a head kept apart; any byte changed in
an earlier line, a removed last line, a reordered pair or a lost head is found and the first
broken line named (`squidd audit verify`, exit 1); secrets never reach a preview; a line
written past the head by a crash is adopted, a torn tail cut off."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from squidd.cli import main
from squidd.core.audit import Auditor, ChainBroken, Decision, arguments_hash
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, ToolCall, ToolResult
from squidd.core.tools import ToolRegistry
from squidd.log import SecretRedactor
from squidd.store.audit import AuditFile
from squidd.store.jsonl import JsonlStore
from tests.support.agent import agent_loop
from tests.support.cli import logging_back_to_defaults as logging_back_to_defaults
from tests.support.config import data_dir_config
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("matrix:!room:example.org")
SECRET = "hunter2-very-secret-value"


class EchoTool:
    name = "echo"
    description = "Echoes its text; fails on 'boom'."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
    }

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        text = str(arguments.get("text", ""))
        self.calls.append(text)
        if text == "boom":
            return ToolResult("it blew up", is_error=True)
        return ToolResult(text * 2)


async def _fill(log: AuditFile, count: int) -> None:
    auditor = Auditor(log, SecretRedactor([SECRET]).scrub)
    for index in range(count):
        call = ToolCall(id=f"c{index}", name="echo", arguments=json.dumps({"text": f"t{index}"}))
        await auditor.record(SESSION, "matrix", call, decision=Decision.ALLOWED, result_chars=4)


async def test_one_line_per_call_through_a_turn(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log = AuditFile(data)
    tool = EchoTool()
    llm, _ = scripted_llm(
        Reply(tool_calls=[("echo", {"text": "hi"}), ("echo", {"text": "boom"})]),
        Reply(tool_calls=[("echo", {"text": f"key sk-{SECRET} and {SECRET}"})]),
        "done",
    )
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(JsonlStore(data, workspace_dir=tmp_path)),
        registry=ToolRegistry([tool]),
        prompt=StaticPrompt("sys"),
        auditor=Auditor(log, SecretRedactor([SECRET]).scrub),
    )
    assert await loop.run(SESSION, "go", "matrix") == "done"

    records = log.records()
    assert [r["n"] for r in records] == [1, 2, 3] and len(tool.calls) == 3
    first, failed, secret = records
    assert first["session"] == SESSION and first["channel"] == "matrix"
    assert first["tool"] == "echo" and first["decision"] == "allowed" and first["by"] is None
    assert first["preview"] == '{"text":"hi"}' and first["result_chars"] == 4
    assert first["args_sha256"] == arguments_hash("echo", '{"text": "hi"}')
    assert first["error"] is None and failed["error"] == "it blew up"
    assert SECRET not in log.log_path.read_text() and "[redacted]" in secret["preview"]
    assert log.verify() == (3, records[-1]["hash"])


async def test_the_same_arguments_in_another_order_hash_the_same() -> None:
    assert arguments_hash("shell", '{"a":1,"b":2}') == arguments_hash("shell", '{"b": 2, "a": 1}')
    assert arguments_hash("shell", '{"a":1}') != arguments_hash("shell", '{"a":2}')
    assert arguments_hash("shell", '{"a":1}') != arguments_hash("other", '{"a":1}')


@pytest.mark.parametrize("line", [1, 2, 3, 4])
async def test_any_byte_changed_in_an_earlier_line_is_named(tmp_path: Path, line: int) -> None:
    log = AuditFile(tmp_path)
    await _fill(log, 5)
    original = log.log_path.read_bytes()
    lines = original.split(b"\n")
    start = sum(len(x) + 1 for x in lines[: line - 1])
    # Every byte of the line, changed one at a time, is caught and the line named.
    for offset in range(len(lines[line - 1])):
        damaged = bytearray(original)
        damaged[start + offset] = (damaged[start + offset] + 1) % 128 or 1
        log.log_path.write_bytes(bytes(damaged))
        with pytest.raises(ChainBroken) as caught:
            log.verify()
        assert caught.value.line == line, (offset, caught.value)
    log.log_path.write_bytes(original)
    assert log.verify()[0] == 5


async def test_a_removed_last_line_and_a_reordered_pair_are_found(tmp_path: Path) -> None:
    log = AuditFile(tmp_path)
    await _fill(log, 4)
    original = log.log_path.read_text()
    lines = original.splitlines(keepends=True)
    log.log_path.write_text("".join(lines[:-1]))
    with pytest.raises(ChainBroken) as caught:
        log.verify()
    assert caught.value.line == 4 and "missing" in caught.value.reason

    log.log_path.write_text("".join([lines[0], lines[2], lines[1], lines[3]]))
    with pytest.raises(ChainBroken) as caught:
        log.verify()
    assert caught.value.line == 2

    log.log_path.write_text(original)
    log.head_path.unlink()
    with pytest.raises(ChainBroken):
        log.verify()


async def test_a_line_past_the_head_is_adopted_and_a_torn_tail_cut(tmp_path: Path) -> None:
    log = AuditFile(tmp_path)
    await _fill(log, 2)
    head = log.head_path.read_text()
    await _fill(log, 1)
    log.head_path.write_text(head)  # as if killed after the line, before the head
    await _fill(log, 1)
    assert log.verify()[0] == 4

    with log.log_path.open("ab") as handle:
        handle.write(b'{"n":5,"time":"20')  # killed mid-write
    await _fill(log, 1)
    assert log.verify()[0] == 5
    assert [r["n"] for r in log.records()] == [1, 2, 3, 4, 5]


@pytest.mark.usefixtures("logging_back_to_defaults")
async def test_the_cli_lists_filters_and_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    log = AuditFile(data)
    await _fill(log, 3)
    config = data_dir_config(tmp_path, data)
    assert main(["audit", "--config", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["#1", "#2", "#3"]
    assert main(["audit", "--config", str(config), "--tool", "nothing"]) == 0
    assert "no tool calls" in capsys.readouterr().out
    assert main(["audit", "--config", str(config), "--decision", "allowed"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert main(["audit", "verify", "--config", str(config)]) == 0
    assert "intact: 3 lines" in capsys.readouterr().out

    text = log.log_path.read_text().replace("t1", "t9")
    log.log_path.write_text(text)
    assert main(["audit", "verify", "--config", str(config)]) == 1
    assert "line 2:" in capsys.readouterr().err
