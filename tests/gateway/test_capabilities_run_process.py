"""End to end through `squidd run` as a process, with the scripted model: one turn of a
conversation calls an MCP tool (mcp-server-time over stdio), reads a skill's body, runs a
web search (a loopback server answering in SearXNG's JSON format) and starts a background
sub-agent. The daemon is killed while the sub-agent works; after the restart the
conversation's agent answers from the sub-agent's report exactly once, and its next turn
sees that report in its history. `squidd status` shows the sub-agent while it runs."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.config import write_daemon_config
from tests.support.daemon import run_squidd
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_daemon import (
    GRACE_S,
    Daemon,
    ask,
    replies,
    start_ready,
    wait_until,
)
from tests.tools.mcp.servers import time_server
from tests.tools.test_web_search import SearchServer

TASK = "find out how many hearts a squid has"
SKILL_BODY = "When asked about squids, always mention their three hearts (skill-body-7f3a)."
ON_IT = "It is morning in Tokyo; a sub-agent is counting hearts."
ANSWER = "Your researcher says squids have 3 hearts."


@pytest.fixture
def search() -> Iterator[SearchServer]:
    with SearchServer() as running:
        yield running


def all_replies(data: Path) -> list[dict[str, Any]]:
    out = data / "spool" / "out"
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))] if out.exists() else []


def write_setup(tmp: Path, llm_url: str, search_url: str) -> Path:
    config = write_daemon_config(
        tmp,
        llm_url,
        api_key="sk-test-capabilities-key-5678",
        gateway={"shutdown_grace_s": GRACE_S},
        mcp={"servers": [time_server()]},
        **{"tools.web_search": {"enabled": True, "backend": "searxng", "url": search_url}},
    )
    skill = tmp / "data" / "workspace" / "skills" / "squid-facts" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(
        f"---\nname: squid-facts\ndescription: How to talk about squids.\n---\n{SKILL_BODY}\n",
        encoding="utf-8",
    )
    return config


def test_mcp_skill_search_and_a_sub_agent_reporting_once_across_a_restart(
    tmp_path: Path, fake_llm: FakeLLM, search: SearchServer, daemons: list[Daemon]
) -> None:
    lock = threading.Lock()
    sub_attempts = 0
    after_tools: list[list[dict[str, Any]]] = []
    report_turns: list[list[dict[str, Any]]] = []

    def respond(request: dict[str, Any]) -> Reply:
        nonlocal sub_attempts
        messages = request["messages"]
        users = [m for m in messages if m["role"] == "user"]
        if users and users[0]["content"] == TASK:  # the sub-agent's session
            with lock:
                sub_attempts += 1
                first = sub_attempts == 1
            # The first attempt hangs until the daemon is killed under it.
            return Reply("never delivered", delay=30) if first else Reply("Squids have 3 hearts.")
        last = messages[-1]
        if last["role"] == "tool":
            after_tools.append(messages)
            return Reply(ON_IT)
        if str(last["content"]).startswith("Sub-agent report ("):
            report_turns.append(messages)
            return Reply(ANSWER)
        if last["content"] == "plan my squid morning":
            return Reply(
                tool_calls=[
                    ("time__get_current_time", {"timezone": "Asia/Tokyo"}),
                    ("read_skill", {"name": "squid-facts"}),
                    ("web_search", {"query": "squid facts"}),
                    ("spawn", {"task": TASK, "wait": False}),
                ]
            )
        return Reply("fine")

    fake_llm.responder = respond
    config = write_setup(tmp_path, fake_llm.base_url, search.url)
    data = tmp_path / "data"

    first = start_ready(tmp_path, config, daemons)
    wait_until(lambda: "mcp_server_up" in first.log_text())
    ask(data, "t1", "plan my squid morning")
    wait_until(lambda: sub_attempts == 1)
    assert [r["text"] for r in replies(data, "t1")] == [ON_IT]

    # What the model got back in that one turn: the MCP result, the skill body, the search.
    tool_results = [m["content"] for m in after_tools[0] if m["role"] == "tool"]
    assert len(tool_results) == 4
    assert any(
        json.loads(c).get("timezone") == "Asia/Tokyo" for c in tool_results if c.startswith("{")
    )
    assert any(SKILL_BODY in c for c in tool_results)
    assert any(
        "Squid - Wikipedia" in c and "en.wikipedia.org/wiki/Squid" in c for c in tool_results
    )
    assert any("started in the background" in c for c in tool_results)
    assert search.requests and search.requests[0][1]["q"] == ["squid facts"]

    status = run_squidd(config, "status")
    assert status.returncode == 0, status.stderr
    assert "sub-agents: 1 running" in status.stdout
    assert "  spool-s1: 1 running" in status.stdout

    first.proc.send_signal(signal.SIGKILL)  # in the middle of the sub-agent's work
    first.proc.wait(timeout=10)

    second = start_ready(tmp_path, config, daemons)
    wait_until(lambda: any(r["text"] == ANSWER for r in all_replies(data)))
    wait_until(lambda: not list((data / "gateway" / "runs").glob("*.json")))
    assert "scheduled_run_resumed" in second.log_text()
    assert second.terminate() == 0

    start_ready(tmp_path, config, daemons)  # a later start answers nothing again
    ask(data, "t2", "thanks, anything else?")

    delivered = [r["text"] for r in all_replies(data)]
    assert delivered.count(ANSWER) == 1
    assert delivered.count(ON_IT) == 1
    assert len(delivered) == 3  # the turn, the answer from the report, the next turn
    assert sub_attempts == 2
    # The report was a turn of the conversation: it saw the earlier exchange ...
    assert len(report_turns) == 1
    assert any(m["content"] == "plan my squid morning" for m in report_turns[0])
    assert "Squids have 3 hearts." in report_turns[0][-1]["content"]
    # ... and the conversation's next turn has the report and the answer in its history.
    next_turn = [
        r
        for r in fake_llm.chat_requests
        if r["messages"][-1]["content"] == "thanks, anything else?"
    ]
    history = [str(m["content"]) for m in next_turn[0]["messages"]]
    assert any(c.startswith(f"Sub-agent report ({TASK}):") for c in history)
    assert ANSWER in history
