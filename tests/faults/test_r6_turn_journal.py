"""R6: a turn cut short by SIGKILL resumes from its journal (store/journal.py) - a cron turn.

A cron run (kept on disk as a pending run, so the restarted daemon runs it again) whose
model asks for one shell call appending a line to a file, then answers. The real daemon is
SIGKILLed at each point of the turn and started again:
- before the first model answer (the model is slow);
- after the answer that asks for the tool (a test-only setting kills it the moment that
  record is durable);
- while the tool runs (the command appended and sleeps);
- after the tool's result (killed the moment the result is durable);
- while the final answer is written (the model is slow with it);
- after the answer, before delivery (the channel's out folder cannot be written).
Each time: the line is in the file exactly once, or not at all and the model was told; the
reply is sent once; the turn is in the history once; a recorded answer is never asked for
again (the LLM requests are counted); the journal is gone at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from squidd.core.journal import turn_key
from squidd.core.models import InboundKind
from squidd.core.runs import PendingRun
from squidd.store.pending_runs import PendingRunsDir
from tests.faults.harness import SpoolDaemon, wait_until
from tests.faults.journal_support import DONE, Model, shell_sections
from tests.support.crash_points import crash_env
from tests.support.daemon import SPOOL, DaemonProcess, run_squidd
from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SESSION = "cron:append"
SOURCE = "append@2026-01-01T08:00:00+00:00"
KEY = turn_key("cron", SOURCE)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def spool(tmp_path: Path, llm: FakeLLM) -> Iterator[SpoolDaemon]:
    """The daemon's config and data dir with the cron run on disk; every run killed after."""
    spool = SpoolDaemon(
        tmp_path,
        llm.base_url,
        api_key="sk-test-faults-r6-0001",
        gateway={"delivery_retry_initial_s": 0.2, "delivery_retry_max_s": 0.5},
        **shell_sections("cron"),
    )
    (spool.data / "workspace").mkdir(parents=True)  # the shell's working directory
    run = PendingRun(InboundKind.CRON, SOURCE, SESSION, "append the line", "spool:owner")
    anyio.run(PendingRunsDir(spool.data).put, run)
    yield spool
    spool.close()


def start(spool: SpoolDaemon, crash_after: str = "") -> DaemonProcess:
    env = crash_env(crash_after)
    log = spool.tmp / f"daemon-{len(spool.runs)}.log"
    run = DaemonProcess(spool.config, log, env=env, channel=SPOOL)
    spool.runs.append(run)
    return run


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def journal_files(spool: SpoolDaemon) -> list[Path]:
    folder = spool.data / "gateway" / "journal"
    return list(folder.glob("*.jsonl")) if folder.exists() else []


def finish(spool: SpoolDaemon) -> None:
    """Start again after the kill and wait until the run is answered and cleaned up."""
    start(spool)
    wait_until(lambda: bool(spool.replies()), "the reply")
    wait_until(lambda: not list((spool.data / "gateway" / "runs").glob("*.json")), "the ack")
    wait_until(lambda: not journal_files(spool), "the journal removed")


def check(spool: SpoolDaemon, llm: FakeLLM, path: Path, *, requests: int) -> list[str]:
    """The acceptance: reply once, turn in the history once, the LLM asked `requests`
    times in all; returns the tool results the model saw in its final request."""
    replies = spool.replies()
    assert [r["text"] for r in replies] == [DONE]
    turn = [m for m in spool.history(SESSION)]
    assert [m["role"] for m in turn if m.get("turn") == KEY] == ["user"]
    assert [m["content"] for m in turn if m["role"] == "assistant" and not m.get("tool_calls")] == [
        DONE
    ]
    assert len(llm.chat_requests) == requests
    final = llm.chat_requests[-1]["messages"]
    return [str(m["content"]) for m in final if m["role"] == "tool"]


def command_for(path: Path, then: str = "") -> str:
    return f"echo line >> {json.dumps(str(path))}{then}"


def test_killed_before_the_first_model_answer(
    tmp_path: Path, llm: FakeLLM, spool: SpoolDaemon
) -> None:
    path = tmp_path / "lines.txt"
    model = Model(command_for(path), slow=1)
    llm.responder = model
    start(spool)
    wait_until(lambda: model.seen == 1, "the first request")
    spool.current.kill()
    model.release.set()
    assert not journal_files(spool)  # nothing to record yet
    finish(spool)
    results = check(spool, llm, path, requests=3)  # the unanswered request is asked again
    assert lines(path) == ["line"] and results[0].startswith("exit code 0")


def test_killed_after_the_answer_that_asks_for_the_tool(
    tmp_path: Path, llm: FakeLLM, spool: SpoolDaemon
) -> None:
    path = tmp_path / "lines.txt"
    llm.responder = Model(command_for(path))
    first = start(spool, crash_after="answer")
    wait_until(lambda: first.proc.poll() is not None, "the crash after the answer")
    assert lines(path) == [] and len(journal_files(spool)) == 1
    finish(spool)
    check(spool, llm, path, requests=2)  # the recorded answer is not asked for again
    assert lines(path) == ["line"]
    assert spool.current.count("turn_resumed") == 1


def test_killed_while_the_tool_runs(tmp_path: Path, llm: FakeLLM, spool: SpoolDaemon) -> None:
    path = tmp_path / "lines.txt"
    llm.responder = Model(command_for(path, "; sleep 20"))
    start(spool)
    wait_until(lambda: lines(path) == ["line"], "the tool's effect")
    spool.current.kill()
    finish(spool)
    results = check(spool, llm, path, requests=2)
    # The shell is a side effect: not run again, and the model was told.
    assert lines(path) == ["line"]
    assert "interrupted" in results[0] and "not known whether it took effect" in results[0]
    assert spool.current.count("tool_call_outcome_unknown") == 1


def test_killed_after_the_tools_result(tmp_path: Path, llm: FakeLLM, spool: SpoolDaemon) -> None:
    path = tmp_path / "lines.txt"
    llm.responder = Model(command_for(path))
    first = start(spool, crash_after="result")
    wait_until(lambda: first.proc.poll() is not None, "the crash after the result")
    assert lines(path) == ["line"]
    finish(spool)
    results = check(spool, llm, path, requests=2)
    assert lines(path) == ["line"] and results[0].startswith("exit code 0")


def test_killed_while_the_final_answer_is_written(
    tmp_path: Path, llm: FakeLLM, spool: SpoolDaemon
) -> None:
    path = tmp_path / "lines.txt"
    model = Model(command_for(path), slow=2)
    llm.responder = model
    start(spool)
    wait_until(lambda: model.seen == 2, "the final request")
    spool.current.kill()
    model.release.set()
    finish(spool)
    # The tool-asking answer is not asked again; the final one, never recorded, is.
    results = check(spool, llm, path, requests=3)
    assert lines(path) == ["line"] and results[0].startswith("exit code 0")


def test_killed_after_the_answer_before_delivery(
    tmp_path: Path, llm: FakeLLM, spool: SpoolDaemon
) -> None:
    path = tmp_path / "lines.txt"
    llm.responder = Model(command_for(path))
    blocked = spool.spool / "out"
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("not a folder: replies cannot be written")
    start(spool)
    wait_until(lambda: spool.current.count("reply_delivery_failed") >= 1, "a failed delivery")
    spool.current.kill()
    assert len(journal_files(spool)) == 1  # the reply was not delivered: kept
    second = start(spool)
    wait_until(lambda: second.count("reply_resumed_from_outbox") >= 1, "the reply resumed")
    status = run_squidd(spool.config, "status")
    assert status.returncode == 0, status.stderr
    assert "turns with tool calls not yet delivered (journal):" in status.stdout
    assert f"{SESSION} " in status.stdout and "1 tool call(s)" in status.stdout
    second.kill()
    blocked.unlink()
    finish(spool)
    check(spool, llm, path, requests=2)  # the reply came from the outbox
    assert lines(path) == ["line"]
