"""SIGKILL while the provider chain falls over: the primary answers 503, the secondary takes
the turn over, and the daemon is killed in the middle of the secondary's work. After the
restart the turn journal holds: one reply, the tool's line once, a recorded answer never
asked for again, and the primary (still failing) costs the restarted turn nothing more than
its one failed request per model call.

Kill points: the secondary's streamed answer held part way (killed while it writes); the
moment the secondary's tool-asking answer is durable (the test hook's "answer" point); the
moment the tool's result is durable ("result")."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import SpoolDaemon, wait_until
from tests.faults.journal_support import DONE, Model, shell_sections
from tests.support.config import provider
from tests.support.crash_points import crash_env
from tests.support.daemon import SPOOL, DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.slow, pytest.mark.faults, pytest.mark.timeout(300)]

SESSION = "spool-failover"


class Primary:
    """The primary model server's script: every chat request answered 503."""

    def __init__(self) -> None:
        self.seen = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.seen += 1
        return Reply(status=503)


@pytest.fixture
def servers() -> Iterator[tuple[FakeLLM, FakeLLM]]:
    with FakeLLM(responder=Primary()) as a, FakeLLM() as b:
        yield a, b


def _spool(tmp: Path, a: FakeLLM, b: FakeLLM) -> SpoolDaemon:
    (tmp / "data" / "workspace").mkdir(parents=True)
    return SpoolDaemon(
        tmp,
        a.base_url,
        api_key="sk-test-faults-failover-0001",
        gateway={"delivery_retry_initial_s": 0.2, "delivery_retry_max_s": 0.5},
        llm={
            "providers": [provider("A", a), provider("B", b)],
            "chain": ["A/model-a", "B/model-b"],
            "max_retries": 0,
            "failures_to_cool": 100,  # A is asked at every call: the worst case
        },
        **shell_sections("spool"),
    )


def _start(spool: SpoolDaemon, crash_after: str = "") -> DaemonProcess:
    run = DaemonProcess(
        spool.config,
        spool.tmp / f"daemon-{len(spool.runs)}.log",
        env=crash_env(crash_after),
        channel=SPOOL,
    )
    spool.runs.append(run)
    return run


def _finish(spool: SpoolDaemon) -> None:
    _start(spool)
    wait_until(lambda: bool(spool.replies()), "the reply after the restart")
    wait_until(lambda: spool.pending() == 0, "the message acknowledged")


def _check(spool: SpoolDaemon, path: Path) -> None:
    assert [r["text"] for r in spool.replies()] == [DONE]
    assert path.read_text().splitlines() == ["line"]
    history = spool.history(SESSION)
    assert [m["content"] for m in history if m["role"] == "user"] == ["append the line"]
    journal = spool.data / "gateway" / "journal"
    assert not list(journal.glob("*.jsonl")) if journal.exists() else True


@pytest.mark.parametrize("point", ["answer", "result"])
def test_killed_after_the_secondarys_record_one_reply_after_restart(
    tmp_path: Path, servers: tuple[FakeLLM, FakeLLM], point: str
) -> None:
    a, b = servers
    path = tmp_path / "lines.txt"
    b.responder = Model(f'echo line >> "{path}"')
    spool = _spool(tmp_path, a, b)
    try:
        first = _start(spool, crash_after=point)
        spool.send("m1", "append the line", SESSION)
        wait_until(lambda: first.proc.poll() is not None, f"the kill after the {point}")
        _finish(spool)
        _check(spool, path)
        # B's recorded tool-asking answer was not asked for again: B saw the first call,
        # then only the final one (after the restart).
        assert len(b.chat_requests) == 2
        assert spool.current.count("turn_resumed") == 1
    finally:
        spool.close()


def test_killed_while_the_secondary_writes_its_answer(
    tmp_path: Path, servers: tuple[FakeLLM, FakeLLM]
) -> None:
    a, b = servers
    spool = _spool(tmp_path, a, b)
    written = " ".join(["The secondary's answer, written slowly."] * 6)
    held = threading.Event()

    def slow_then_whole(request: dict[str, Any]) -> Reply:
        if not held.is_set():
            held.set()
            return Reply(content=written, piece_chars=20, piece_delay=0.5)
        return Reply(content=written)

    b.responder = slow_then_whole
    try:
        first = _start(spool)
        spool.send("m1", "write slowly", SESSION)
        wait_until(held.is_set, "the secondary writing")
        wait_until(lambda: first.count("llm_failover") == 1, "the fall-over logged")
        first.kill()
        _finish(spool)
        assert [r["text"] for r in spool.replies()] == [written]
        assert len(b.chat_requests) == 2  # the cut answer was never delivered: asked again
        history = spool.history(SESSION)
        assert [m["content"] for m in history if m["role"] == "assistant"] == [written]
    finally:
        spool.close()
