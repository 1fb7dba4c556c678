"""Poison: a channel whose `send` raises ValueError on one message, through real `squidd run`
children. The message is parked after `max_attempts` tries counted across a SIGKILL and a
restart; the next message of the same session is answered; `squidd status` shows one parked
item; after the fault is removed, `squidd parked retry` delivers it exactly once (also
across a restart after the retry)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.faults.harness import Counts, SpoolDaemon, wait_until
from tests.support.daemon import daemon_env, squidd_argv
from tests.support.fake_llm import FakeLLM

FAULTY = "tests.support.faulty_channel:create_channel"
SESSION = "poison-session"


def squidd(daemon: SpoolDaemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        squidd_argv(daemon.config, *args),
        env=daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def tries(daemon: SpoolDaemon, message_id: str) -> int:
    folder = daemon.spool / "tries"
    return len(list(folder.glob(f"{message_id}.*"))) if folder.exists() else 0


def parked_files(daemon: SpoolDaemon) -> list[dict[str, object]]:
    folder = daemon.data / "parked"
    if not folder.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


@pytest.mark.slow
def test_a_poison_message_is_parked_across_a_restart_and_retried_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    daemon = SpoolDaemon(
        tmp_path,
        fake_llm.base_url,
        api_key="sk-test-faults-poison-0001",
        channel=FAULTY,
        gateway={
            "max_attempts": 3,
            # 1-2 s between attempts: the SIGKILL below lands in that wait.
            "delivery_retry_initial_s": 2.0,
            "delivery_retry_max_s": 2.0,
            "parked_poll_s": 0.2,
        },
    )
    try:
        daemon.spool.mkdir(parents=True)
        (daemon.spool / "fault").write_text("p1-poison\n")
        first = daemon.start()
        daemon.send("p1-poison", "hello poison", SESSION)
        daemon.send("p2-next", "hello next", SESSION)
        wait_until(lambda: tries(daemon, "p1-poison") >= 1, "the first failed send")
        first.kill()
        assert tries(daemon, "p1-poison") == 1
        assert parked_files(daemon) == []

        second = daemon.start()
        wait_until(lambda: daemon.answers()["p2-next"] == 1, "the next message answered")
        (item,) = parked_files(daemon)
        # Three tries in all: one before the SIGKILL, two after, none more.
        assert tries(daemon, "p1-poison") == 3
        assert daemon.answers()["p1-poison"] == 0
        assert (item["attempts"], item["error"], item["state"]) == (3, "ValueError", "parked")
        assert "cannot encode the reply to p1-poison" in str(item["reason"])
        assert isinstance(item["reply"], dict) and item["reply"]["text"] == "echo: hello poison"
        parked_logs = [e for e in second.events() if e.get("event") == "parked"]
        assert len(parked_logs) == 1 and parked_logs[0]["level"] == "error"
        assert parked_logs[0]["error"] == "ValueError"
        # Recorded as handled with failure: the source was told (the spool file is done).
        wait_until(lambda: daemon.pending() == 0, "both messages acknowledged")

        status = squidd(daemon, "status")
        assert status.returncode == 0, status.stderr
        assert "parked: 1 " in status.stdout, status.stdout
        assert "cannot encode the reply to p1-poison" in status.stdout
        listed = squidd(daemon, "parked", "list")
        assert listed.returncode == 0 and str(item["id"]) in listed.stdout, listed.stdout

        (daemon.spool / "fault").unlink()
        retry = squidd(daemon, "parked", "retry", str(item["id"]))
        assert retry.returncode == 0, retry.stderr
        wait_until(lambda: daemon.answers()["p1-poison"] == 1, "the retried reply")
        wait_until(lambda: parked_files(daemon) == [], "the parked item settled")
        assert tries(daemon, "p1-poison") == 4
        assert second.proc.poll() is None

        # A restart after the retry sends nothing again; the session still answers.
        second.kill()
        third = daemon.start()
        daemon.send("p3-after", "hello after", SESSION)
        wait_until(lambda: daemon.answers()["p3-after"] == 1, "a message after the restart")
        after_status = squidd(daemon, "status")
        assert "parked: 0" in after_status.stdout, after_status.stdout
        answers = daemon.answers()
        counts = Counts("poison parked")
        counts.tally(["p1-poison", "p2-next", "p3-after"], answers)
        counts.extra = {"tries": tries(daemon, "p1-poison"), "parked": 1}
        counts.report()
        assert (answers["p1-poison"], answers["p2-next"], answers["p3-after"]) == (1, 1, 1)
        assert tries(daemon, "p1-poison") == 4
        assert third.proc.poll() is None
    finally:
        daemon.close()


@pytest.mark.slow
def test_a_message_that_kills_the_daemon_each_time_is_parked_without_another_try(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Its reply's send ends the process every time (as a crash in a C library would): each
    start counts one attempt before making it, so after three deaths the fourth start parks
    it without a fourth and answers the next message of the session. Then `squidd parked
    retry` with no daemon running: the next start sends it, once."""
    daemon = SpoolDaemon(
        tmp_path,
        fake_llm.base_url,
        api_key="sk-test-faults-poison-0002",
        channel=FAULTY,
        gateway={"max_attempts": 3},
    )
    try:
        daemon.spool.mkdir(parents=True)
        (daemon.spool / "crash").write_text("k1-killer\n")
        daemon.send("k1-killer", "hello killer", SESSION)
        daemon.send("k2-next", "hello next", SESSION)
        for death in range(1, 4):
            run = daemon.start()
            wait_until(lambda: run.proc.poll() is not None, f"death {death}")  # noqa: B023
            assert run.proc.returncode == 70
            assert tries(daemon, "k1-killer") == death
        last = daemon.start()
        wait_until(lambda: daemon.answers()["k2-next"] == 1, "the next message answered")
        (item,) = parked_files(daemon)
        assert (item["error"], item["attempts"]) == ("Interrupted", 3)
        assert "the daemon stopped during each of 3 attempts" in str(item["reason"])
        assert isinstance(item["reply"], dict)  # the reply the turn made is kept
        assert tries(daemon, "k1-killer") == 3
        assert daemon.answers()["k1-killer"] == 0
        assert last.proc.poll() is None

        # Both settled before the kill (the parked one and the answered one acknowledged): a
        # kill between a reply's send and its record is the window in which a channel without
        # idempotent sends (this spool) shows a reply twice, and not this test's kill point.
        wait_until(lambda: daemon.pending() == 0, "both messages acknowledged")
        # The fix is in while the daemon is down: the retry is asked for with no daemon
        # running and sent, once, by the next start.
        last.kill()
        (daemon.spool / "crash").unlink()
        retry = squidd(daemon, "parked", "retry", str(item["id"]))
        assert retry.returncode == 0 and "next start" in retry.stdout, retry.stdout
        assert parked_files(daemon)[0]["state"] == "retry"
        daemon.start()
        wait_until(lambda: daemon.answers()["k1-killer"] == 1, "the retried reply")
        wait_until(lambda: parked_files(daemon) == [], "the parked item settled")
        assert tries(daemon, "k1-killer") == 4
        counts = Counts("poison kills the daemon")
        counts.tally(["k1-killer", "k2-next"], daemon.answers())
        counts.extra = {"deaths": 3, "parked": 1}
        counts.report()
        assert counts.duplicates == 0 and counts.lost == 0
    finally:
        daemon.close()
