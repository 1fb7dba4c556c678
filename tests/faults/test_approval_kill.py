"""An approval question outlives a SIGKILL: a real `squidd run` child asks before the shell
runs, is killed while the question waits; after the restart the question is still open (and
not asked twice), the message's turn resumes from its journal, `/approve <id>` runs the
command exactly once, a second `/approve` changes nothing, and the audit log holds one
`approved` line and verifies. A question whose deadline passed while the daemon was down is a
timeout: the command never runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from squidd.store.approvals import QuestionFiles
from squidd.store.audit import AuditFile
from tests.faults.harness import SpoolDaemon, wait_until
from tests.support.fake_llm import FakeLLM, Reply

SESSION = "approval-session"


def _daemon(tmp_path: Path, llm_url: str, timeout_s: float) -> SpoolDaemon:
    daemon = SpoolDaemon(
        tmp_path,
        llm_url,
        api_key="sk-test-faults-approval-0001",
        agents={"workspace": str(tmp_path / "ws")},
        **{
            "tools.shell": {"enabled": True},
            "tools.policy": {"default_deny": []},
            "tools.approval": {"timeout_s": timeout_s},
        },
    )
    (tmp_path / "ws").mkdir()
    return daemon


def _texts(daemon: SpoolDaemon, message_id: str) -> list[str]:
    return [r["text"] for r in daemon.replies() if r["file"].split(".")[0] == message_id]


def _prompted(daemon: SpoolDaemon) -> str:
    wait_until(lambda: bool(_texts(daemon, "m1")), "the approval prompt")
    [prompt] = _texts(daemon, "m1")
    found = re.search(
        r"Approval needed \(([0-9a-f]{8})\): Run shell: echo ran >> ran\.txt\?", prompt
    )
    assert found is not None, prompt
    return found.group(1)


def _asked_to_run(daemon: SpoolDaemon, fake_llm: FakeLLM, *, then: str) -> str:
    """Start `daemon`; message m1 makes the model ask for `echo ran >> ran.txt` (and answer
    `then` after the call); the id of the approval question that is put."""
    fake_llm.push(Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})]), then)
    daemon.start()
    daemon.send("m1", "run it", SESSION)
    return _prompted(daemon)


def _runs(tmp_path: Path) -> int:
    marker = tmp_path / "ws" / "ran.txt"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


@pytest.mark.slow
def test_killed_while_waiting_the_question_stays_open_and_yes_runs_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    daemon = _daemon(tmp_path, fake_llm.base_url, timeout_s=600)
    try:
        question = _asked_to_run(daemon, fake_llm, then="done")
        daemon.current.kill()

        [waiting] = QuestionFiles(daemon.data).waiting_sync()
        assert waiting.id == question and _runs(tmp_path) == 0
        daemon.start()
        daemon.send("m2", f"/approve {question}", SESSION)
        wait_until(lambda: "done" in _texts(daemon, "m1"), "the reply after the approval")
        daemon.send("m3", f"/approve {question}", SESSION)
        wait_until(lambda: daemon.pending() == 0, "the second answer taken")
        assert _runs(tmp_path) == 1
        # Asked once: the resumed turn met the same question and did not send it again.
        texts = _texts(daemon, "m1")
        assert len(texts) == 2 and texts.count("done") == 1
        assert not _texts(daemon, "m2") and not _texts(daemon, "m3")
        assert len(fake_llm.chat_requests) == 2
    finally:
        daemon.close()
    audit = AuditFile(daemon.data)
    assert [(r["decision"], r["by"]) for r in audit.records()] == [("approved", "tester")]
    assert audit.verify()[0] == 1
    assert QuestionFiles(daemon.data).waiting_sync() == []


@pytest.mark.slow
def test_a_deadline_passed_while_down_is_a_timeout(tmp_path: Path, fake_llm: FakeLLM) -> None:
    daemon = _daemon(tmp_path, fake_llm.base_url, timeout_s=600)
    try:
        question = _asked_to_run(daemon, fake_llm, then="gave up")
        daemon.current.kill()
        # The daemon stays down past the deadline (moved into the past on disk).
        path = daemon.data / "approvals" / "questions" / f"{question}.json"
        record = json.loads(path.read_text())
        record["deadline"] = record["asked_at"]
        path.write_text(json.dumps(record))
        daemon.start()
        wait_until(lambda: "gave up" in _texts(daemon, "m1"), "the reply after the timeout")
        daemon.send("m2", f"/approve {question}", SESSION)
        wait_until(lambda: daemon.pending() == 0, "the late answer taken")
    finally:
        daemon.close()
    assert _runs(tmp_path) == 0
    records = AuditFile(daemon.data).records()
    assert [(r["decision"], r["by"]) for r in records] == [("timeout", None)]
    tool = [m for m in fake_llm.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert tool[0]["content"].startswith("Error: not run: no answer to the approval question")


@pytest.mark.slow
def test_a_stop_while_waiting_leaves_the_question_open_for_the_next_start(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """SIGTERM while a turn waits for an answer: the daemon stops after its grace period
    (the wait is cancelled, the message not acknowledged), exit 0; the question stays open
    and is answered after the next start, the command run once."""
    daemon = _daemon(tmp_path, fake_llm.base_url, timeout_s=600)
    try:
        question = _asked_to_run(daemon, fake_llm, then="done")
        assert anyio.run(daemon.current.stop) == 0
        [waiting] = QuestionFiles(daemon.data).waiting_sync()
        assert waiting.id == question and daemon.pending() == 1  # m1 not acknowledged
        daemon.start()
        daemon.send("m2", f"/approve {question}", SESSION)
        wait_until(lambda: "done" in _texts(daemon, "m1"), "the reply after the approval")
    finally:
        daemon.close()
    assert _runs(tmp_path) == 1
    assert [r["decision"] for r in AuditFile(daemon.data).records()] == ["approved"]
