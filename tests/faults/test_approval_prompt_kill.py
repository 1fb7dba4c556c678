"""An approval prompt kept in the outbox outlives a SIGKILL: a real `squidd run` child keeps
the prompt durably and is killed before it is sent (the "outbox" kill point of
tests/support/crash_points.py, right after the first outbox write). After the restart the
message's turn resumes from its journal, meets the same question, and the kept prompt is
sent, once; `/approve <id>` runs the command exactly once and the reply follows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from squidd.store.approvals import QuestionFiles
from tests.faults.harness import SPOOL, SpoolDaemon, wait_until
from tests.support.crash_points import crash_env
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

SESSION = "approval-prompt-session"
PROMPT = re.compile(r"Approval needed \(([0-9a-f]{8})\): Run shell: echo ran >> ran\.txt\?")


def _texts(daemon: SpoolDaemon, message_id: str) -> list[str]:
    return [r["text"] for r in daemon.replies() if r["file"].split(".")[0] == message_id]


def _runs(tmp_path: Path) -> int:
    marker = tmp_path / "ws" / "ran.txt"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


@pytest.mark.slow
def test_a_prompt_kept_before_a_kill_is_sent_once_and_the_tool_runs_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.push(Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})]), "done")
    daemon = SpoolDaemon(
        tmp_path,
        fake_llm.base_url,
        api_key="sk-test-faults-approval-prompt-1",
        agents={"workspace": str(tmp_path / "ws")},
        **{
            "tools.shell": {"enabled": True},
            "tools.policy": {"default_deny": []},
            "tools.approval": {"timeout_s": 600},
        },
    )
    (tmp_path / "ws").mkdir()
    try:
        env = crash_env("outbox")
        first = DaemonProcess(daemon.config, tmp_path / "daemon-0.log", env=env, channel=SPOOL)
        daemon.runs.append(first)
        daemon.send("m1", "run it", SESSION)
        wait_until(lambda: first.proc.poll() is not None, "the kill after the prompt was kept")
        assert "approval_asked" in first.log_text() and daemon.replies() == []
        [waiting] = QuestionFiles(daemon.data).waiting_sync()
        assert len(list((daemon.data / "gateway" / "outbox").glob("*.json"))) == 1

        daemon.start()
        wait_until(lambda: bool(_texts(daemon, "m1")), "the kept prompt")
        [prompt] = _texts(daemon, "m1")
        found = PROMPT.search(prompt)
        assert found is not None and found.group(1) == waiting.id, prompt
        daemon.send("m2", f"/approve {waiting.id}", SESSION)
        wait_until(lambda: "done" in _texts(daemon, "m1"), "the reply after the approval")
        wait_until(lambda: daemon.pending() == 0, "every message settled")
        assert sorted(_texts(daemon, "m1")) == sorted([prompt, "done"])  # the prompt once
        assert _runs(tmp_path) == 1
        assert len(fake_llm.chat_requests) == 2  # the resumed turn took its recorded answer
        assert list((daemon.data / "gateway" / "outbox").glob("*.json")) == []
    finally:
        daemon.close()
    assert QuestionFiles(daemon.data).waiting_sync() == []
