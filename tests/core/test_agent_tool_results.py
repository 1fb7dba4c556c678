"""Large tool results: a 200 kB result never reaches the model whole; the whole text is
saved under the data dir, the note names the file, and read_file pages through it with
`offset`/`limit` (characters)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, ToolResult
from squidd.core.tools import ToolRegistry
from squidd.store.jsonl import JsonlStore
from squidd.store.tool_results import ToolResultFiles
from squidd.tools.files import ReadFileTool
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import scripted_llm
from tests.support.prompt import StaticPrompt

pytestmark = pytest.mark.anyio

SESSION = SessionId("matrix:!room:example.org")
BIG = "".join(f"line {i:06d} of a very long listing\n" for i in range(6000))  # ~200 kB


class DumpTool:
    name = "dump"
    description = "A huge listing."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(BIG)


async def test_a_200kB_result_never_reaches_the_model_whole(tmp_path: Path) -> None:
    assert len(BIG) > 200_000
    data = tmp_path / "data"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    results = ToolResultFiles(data)
    reader = ReadFileTool(workspace, results_dir=results.directory)

    def read_on(body: dict[str, Any]) -> Reply:
        note = body["messages"][-1]["content"]
        assert "tool-results/" in note
        name = note.split("The whole text is in the file ", 1)[1].split(";", 1)[0]
        return Reply(tool_calls=[("read_file", {"path": name, "offset": 16000, "limit": 100})])

    llm, mock = scripted_llm(Reply(tool_calls=[("dump", {})]), read_on, "done")
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(JsonlStore(data, workspace_dir=workspace)),
        registry=ToolRegistry([DumpTool(), reader]),
        prompt=StaticPrompt("sys"),
        results=results,
        max_result_chars=16_000,
    )
    assert await loop.run(SESSION, "dump it", "matrix") == "done"

    for body in mock.requests:
        assert all(len(m.get("content") or "") < 17_000 for m in body["messages"])
    saved = list(results.directory.iterdir())
    assert len(saved) == 1 and saved[0].read_text() == BIG
    page = mock.requests[2]["messages"][-1]["content"]
    assert page.startswith(f"[characters 16000-16100 of {len(BIG)}; continue with offset=16100]")
    assert page.split("\n", 1)[1] == BIG[16000:16100]


async def test_read_file_offset_limit_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("abcdefghij")
    tool = ReadFileTool(tmp_path)
    result = await tool.execute({"path": "notes.txt", "offset": 8, "limit": 5})
    assert result.content == "[characters 8-10 of 10; end of file]\nij"
    whole = await tool.execute({"path": "notes.txt"})
    assert whole.content == "abcdefghij"
    bad = await tool.execute({"path": "notes.txt", "offset": -1})
    assert bad.is_error


async def test_tool_results_are_not_readable_without_the_results_dir(tmp_path: Path) -> None:
    tool = ReadFileTool(tmp_path)
    result = await tool.execute({"path": "tool-results/x.txt"})
    assert result.is_error
