"""A background sub-agent through `squidd run` as a process: the daemon is killed while the
sub-agent works, and after the restart its report reaches the conversation exactly once: as
a turn of the conversation's own session, so the parent agent answers from it and knows of
it on the next turn."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_daemon import (
    Daemon,
    drop_message,
    spool_config,
    start_ready,
    wait_until,
)

TASK = "dig into the squid literature"


def all_replies(data: Path) -> list[dict[str, Any]]:
    out = data / "spool" / "out"
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))] if out.exists() else []


def test_a_background_sub_agent_reports_once_after_a_restart_mid_work(
    tmp_path: Path,
    fake_llm: FakeLLM,
    daemons: list[Daemon],
) -> None:
    sub_requests = 0
    report_turns: list[list[dict[str, Any]]] = []
    lock = threading.Lock()

    def respond(request: dict[str, Any]) -> Reply:
        nonlocal sub_requests
        messages = request["messages"]
        users = [m for m in messages if m["role"] == "user"]
        if users and users[0]["content"] == TASK:
            with lock:
                sub_requests += 1
                first = sub_requests == 1
            # The first attempt hangs until the daemon is killed under it.
            return Reply("never delivered", delay=30) if first else Reply("Squids have 3 hearts.")
        if messages[-1]["role"] == "tool":
            return Reply("On it; a sub-agent is digging.")
        if str(messages[-1]["content"]).startswith(f"Sub-agent report ({TASK}):"):
            report_turns.append(messages)
            return Reply("Your researcher says squids have 3 hearts.")
        return Reply(tool_calls=[("spawn", {"task": TASK, "wait": False})])

    fake_llm.responder = respond
    config = spool_config(tmp_path, fake_llm.base_url)
    data = tmp_path / "data"
    first = start_ready(tmp_path, config, daemons)
    drop_message(data, "m1", "research squids for me")
    wait_until(lambda: sub_requests == 1)
    wait_until(lambda: any("On it" in r["text"] for r in all_replies(data)))
    assert list((data / "gateway" / "runs").glob("*.json"))  # the sub-agent's run, on disk
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)

    second = start_ready(tmp_path, config, daemons)
    wait_until(lambda: any("3 hearts" in r["text"] for r in all_replies(data)))
    wait_until(lambda: not list((data / "gateway" / "runs").glob("*.json")))
    assert "scheduled_run_resumed" in second.log_text()
    assert second.terminate() == 0

    start_ready(tmp_path, config, daemons)  # a later start answers nothing again
    later: list[list[dict[str, Any]]] = []

    def respond_later(request: dict[str, Any]) -> Reply:
        later.append(request["messages"])
        return Reply("fine")

    fake_llm.responder = respond_later
    drop_message(data, "m2", "later")
    wait_until(lambda: any(r["text"] == "fine" for r in all_replies(data)))
    reports = [r for r in all_replies(data) if "3 hearts" in r["text"]]
    assert len(reports) == 1
    assert reports[0]["target"] == "tester"
    assert reports[0]["text"] == "Your researcher says squids have 3 hearts."
    assert sub_requests == 2
    # The report was a turn of the conversation itself: its history was there ...
    assert len(report_turns) == 1
    assert any(m["content"] == "research squids for me" for m in report_turns[0])
    assert "Squids have 3 hearts." in report_turns[0][-1]["content"]
    # ... and the next turn of the conversation sees the report and the answer to it.
    history = [str(m["content"]) for m in later[0]]
    assert any(c.startswith(f"Sub-agent report ({TASK}):") for c in history)
    assert "Your researcher says squids have 3 hearts." in history
