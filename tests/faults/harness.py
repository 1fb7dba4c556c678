"""The fault suite's common parts: a `squidd run` child fed through the spool channel, the
seeded randomness every scenario prints (a fixed seed unless `FAULT_SEED` names one, so a
run is replayed with `FAULT_SEED=n`),
and the counts each scenario reports (sent, answered, duplicates, lost, crashes)."""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.config import write_daemon_config
from tests.support.daemon import SPOOL, DaemonProcess
from tests.support.spool_channel import write_atomic
from tests.support.summary import note

SUMMARY = "fault suite counts"
"""The heading under which every scenario's counts are printed again at the end of the run."""


DEFAULT_SEED = 674417
"""The seed of every run that names none (CI's): the one that once found a resent reply."""


def seeded(scenario: str) -> random.Random:
    """The scenario's draws, the same for a given seed on every run: `FAULT_SEED=n` replays
    n; without it the suite runs `DEFAULT_SEED`, so CI runs one scenario and never fails by
    the luck of a draw; `FAULT_SEED=random` draws a new seed from the clock, to explore.
    The seed is printed for a replay."""
    raw = os.environ.get("FAULT_SEED", "").strip()
    seed = time.time_ns() % 1_000_000 if raw == "random" else int(raw or DEFAULT_SEED)
    print(f"{scenario}: FAULT_SEED={seed}")
    return random.Random(f"{scenario}:{seed}")  # noqa: S311 - a replayable test draw


@dataclass
class Counts:
    scenario: str
    sent: int = 0
    answered: int = 0
    duplicates: int = 0
    lost: int = 0
    crashes: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def tally(self, sent: Iterable[str], answers: Counter[str]) -> None:
        ids = list(sent)
        self.sent = len(ids)
        self.answered = sum(1 for i in ids if answers[i] >= 1)
        self.duplicates = sum(answers[i] - 1 for i in ids if answers[i] > 1)
        self.lost = sum(1 for i in ids if answers[i] == 0)

    def report(self) -> str:
        fields = dict(
            sent=self.sent,
            answered=self.answered,
            duplicates=self.duplicates,
            lost=self.lost,
            crashes=self.crashes,
            **self.extra,
        )
        line = f"{self.scenario}: " + " ".join(f"{k}={v}" for k, v in fields.items())
        print(line)
        note(SUMMARY, line)
        return line


def wait_until(check: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    """Poll foreign state (files, a log) until `check`; the bound is for a broken run only."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class SpoolDaemon:
    """`squidd run` children (one at a time) on one config and data dir, fed by files."""

    def __init__(
        self, tmp: Path, llm_url: str, *, api_key: str, channel: str = SPOOL, **sections: Any
    ) -> None:
        self.channel = channel  # the test channel's factory, `module:function`
        gateway = {"shutdown_grace_s": 2, **sections.pop("gateway", {})}
        self.tmp = tmp
        self.config = write_daemon_config(
            tmp, llm_url, api_key=api_key, gateway=gateway, **sections
        )
        self.data = tmp / "data"
        self.spool = self.data / "spool"
        self.runs: list[DaemonProcess] = []

    @property
    def current(self) -> DaemonProcess:
        return self.runs[-1]

    def start(self) -> DaemonProcess:
        run = DaemonProcess(
            self.config, self.tmp / f"daemon-{len(self.runs)}.log", channel=self.channel
        )
        self.runs.append(run)
        return run

    def close(self) -> None:
        for run in self.runs:
            run.kill()

    def send(self, message_id: str, text: str, session: str) -> None:
        write_atomic(
            self.spool / "in" / f"{message_id}.json",
            {"session": session, "sender": "tester", "text": text},
        )

    def replies(self) -> list[dict[str, Any]]:
        out = self.spool / "out"
        if not out.exists():
            return []
        found = []
        for path in sorted(out.glob("*.json")):
            if path.name.startswith("."):
                continue
            found.append({**json.loads(path.read_text()), "file": path.name})
        return found

    def answers(self) -> Counter[str]:
        return Counter(r["file"].split(".")[0] for r in self.replies())

    def pending(self) -> int:
        incoming = self.spool / "in"
        return len(list(incoming.glob("*.json"))) if incoming.exists() else 0

    def history(self, session: str) -> list[dict[str, Any]]:
        from squidd.store.jsonl import JsonlStore

        path = JsonlStore(self.data).history_path(session)
        lines = []
        for raw in path.read_bytes().splitlines() if path.exists() else []:
            try:
                lines.append(json.loads(raw))
            except ValueError:
                continue
        return lines

    def log_events(self) -> list[dict[str, Any]]:
        return [e for run in self.runs for e in run.events()]


def new_id() -> str:
    return uuid.uuid4().hex[:12]
