"""R6, MCP: an MCP tool call cut short by SIGKILL runs again after the restart only when its
server annotated the tool `idempotentHint`; a tool without annotations is a side effect, not
run again, and the model is told its outcome is unknown.

The real daemon, the scripted model, and an SDK-written streamable-HTTP MCP server
(tests/tools/mcp/notes_server.py, its own process, so it outlives the daemon's kill). The
message is taken out of the spool while the daemon restarts and put back once the server is
connected again: a redelivery that comes a little later, so the resumed turn finds the tool
offered.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import SpoolDaemon, wait_until
from tests.support.fake_llm import FakeLLM, Reply
from tests.tools.mcp.servers import free_port, http_server, running_http_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DONE = "The note is written."


@pytest.fixture
def mcp_port() -> Iterator[int]:
    port = free_port()
    with running_http_server(port, "notes_server.py"):
        yield port


@pytest.fixture
def spool(tmp_path: Path, fake_llm: FakeLLM, mcp_port: int) -> Iterator[SpoolDaemon]:
    notes = http_server(mcp_port, name="notes")
    spool = SpoolDaemon(
        tmp_path, fake_llm.base_url, api_key="sk-test-faults-r6-mcp-01", mcp={"servers": [notes]}
    )
    yield spool
    spool.close()


def model_for(tool: str, note: Path) -> Any:
    def answer(request: dict[str, Any]) -> Reply:
        if any(m["role"] == "tool" for m in request["messages"]):
            return Reply(content=DONE)
        return Reply(tool_calls=[(tool, {"path": str(note), "text": "hello", "wait": 60})])

    return answer


def runs(note: Path) -> int:
    path = Path(f"{note}.runs")
    return len(path.read_text().splitlines()) if path.exists() else 0


def interrupt_and_resume(spool: SpoolDaemon, note: Path) -> None:
    """Kill squidd while the tool runs, resume after a restart, wait for the one reply."""
    spool.start()
    wait_until(lambda: spool.current.count("mcp_server_up") >= 1, "the MCP server up")
    spool.send("m1", "write the note", "notes-session")
    wait_until(lambda: runs(note) == 1, "the tool running")
    spool.current.kill()
    message = spool.spool / "in" / "m1.json"
    held = spool.tmp / "m1.json"
    message.rename(held)
    spool.start()
    wait_until(lambda: spool.current.count("mcp_server_up") >= 1, "the MCP server up again")
    held.rename(message)
    wait_until(lambda: bool(spool.replies()), "the reply")
    wait_until(lambda: not list((spool.data / "gateway" / "journal").glob("*")), "cleaned up")
    assert [r["text"] for r in spool.replies()] == [DONE]
    assert spool.current.count("turn_resumed") == 1


def final_tool_results(llm: FakeLLM) -> list[str]:
    final = llm.chat_requests[-1]["messages"]
    return [str(m["content"]) for m in final if m["role"] == "tool"]


def test_an_idempotent_mcp_tool_is_run_again(
    tmp_path: Path, fake_llm: FakeLLM, spool: SpoolDaemon
) -> None:
    note = tmp_path / "note.txt"
    fake_llm.responder = model_for("notes__put_note", note)
    interrupt_and_resume(spool, note)
    assert runs(note) == 2
    assert len(fake_llm.chat_requests) == 2  # the recorded answer was not asked for again
    assert "wrote hello" in final_tool_results(fake_llm)[0]


def test_an_mcp_tool_without_annotations_is_not_run_again(
    tmp_path: Path, fake_llm: FakeLLM, spool: SpoolDaemon
) -> None:
    note = tmp_path / "note.txt"
    fake_llm.responder = model_for("notes__add_note", note)
    interrupt_and_resume(spool, note)
    assert runs(note) == 1
    assert len(fake_llm.chat_requests) == 2
    told = final_tool_results(fake_llm)[0]
    assert "interrupted" in told and "not known" in told
