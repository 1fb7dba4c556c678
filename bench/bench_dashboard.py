"""The dashboard's overview, server side, with 1,000 sessions and 30 days of usage ledger.

Builds a data dir holding 1,000 sessions (a history file each) and 30 days of ledger (each
session with a turn and a tool step on one of three models every day: 60,000 records,
the compacted form finished days take), plus ten cron jobs; then times what the overview's
route does after the login check: the daemon's snapshot (a fixed one, as `squidd status`
prints it with ten channels and caps), the overview's values (the jobs file, the 30 days
of sums, the charts) and the page rendered from its template. Reported: the first render
(it reads the 29 finished days once) and the median of the next ones, against the
target of 100 ms.

    python bench/bench_dashboard.py [--sessions 1000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from squidd.core.cron import make_job
from squidd.core.cron_service import CronJobs
from squidd.core.usage import Price, UsageRecord
from squidd.fs import append_lines_locked
from squidd.gateway.dashboard_host import DaemonDashboardHost
from squidd.store.cron_jobs import JobsFile
from squidd.store.jsonl import JsonlStore
from squidd.store.parked import ParkedDir
from squidd.store.timings import TimingsLedger
from squidd.store.usage import USAGE, UsageLedger
from squidd.web.overview import overview
from squidd.web.render import render_text
from squidd.web.timing_days import TimingDays
from squidd.web.usage_days import UsageDays

TARGET_MS = 100.0
DAYS = 30
MODELS = ("model-a", "model-b", "model-c")
CHANNELS = ("matrix", "email", "api")


def fill(data: Path, sessions: int) -> None:
    today = datetime.now(UTC).date()
    for n in range(sessions):
        history = data / "sessions" / f"{CHANNELS[n % 3]}_person-{n}-{n:020x}.jsonl"
        append_lines_locked(history, ['{"role": "user", "content": "hello"}'] * 4)
    for back in range(DAYS):
        day = (today - timedelta(days=back)).isoformat()
        lines = []
        for n in range(sessions):
            name, model = f"{CHANNELS[n % 3]}:person-{n}", MODELS[(n + back) % 3]
            lines.append(USAGE.dumps(UsageRecord(day, name, model, "turn", 900, 120, 400, 3)))
            lines.append(USAGE.dumps(UsageRecord(day, name, model, "tool_step", 1500, 80, 900, 2)))
        append_lines_locked(data / "usage" / f"{day}.jsonl", lines)
    jobs = JobsFile(data)
    for n in range(10):
        job = make_job(
            f"job-{n}", "tidy up", every="12h", timezone="UTC", target="", now=datetime.now(UTC)
        )
        jobs.modify_sync(lambda existing, job=job: [*existing, job])


def snapshot() -> dict[str, Any]:
    child = {
        "state": "connected",
        "detail": "",
        "since": "2026-11-27T10:00:00+00:00",
        "restarts": 0,
    }
    return {
        "children": [{"name": f"channel-{n}", **child} for n in range(10)],
        "turns": {"in_flight": 2, "queued": 5, "sessions": 1000},
        "model": {"state": "ok"},
        "usage_today": {"day": "", "calls": 5000, "prompt_tokens": 2_400_000},
        "limits": [
            {"scope": "daily tokens", "used": 2_600_000, "cap": 5_000_000, "reached": False}
        ],
        "parked": {"count": 3, "newest_id": "p1", "newest_at": "", "newest_reason": "failed"},
        "heartbeat": None,
        "unattended_denied": [],
    }


def prices(models: Iterable[str]) -> dict[str, Price]:
    return {m: Price(input=1.0, output=4.0, cached_input=0.25) for m in models}


async def measure(data: Path, rounds: int) -> tuple[float, float]:
    """(first render ms, median ms of the next `rounds`)."""

    async def status() -> dict[str, Any]:
        return snapshot()

    host = DaemonDashboardHost(
        data_dir=data,
        cron=CronJobs(JobsFile(data), default_timezone="UTC"),
        status=status,
        approvals=None,
        store=JsonlStore(data),
        usage=UsageLedger(data),
        price_list=prices,
        search=lambda query, limit: JsonlStore(data).search_all_sessions(query, limit=limit),
        parked_dir=ParkedDir(data),
        control_ops=dict,
        backup_dir=data / "backups",
        backup=lambda: data / "backups" / "none.tar.gz",
        timings=TimingsLedger(data),
    )
    history, times = UsageDays(host), TimingDays(host)

    async def once() -> float:
        started = time.perf_counter()
        values = await overview(host, await host.snapshot(), history, times)
        page = render_text("overview.html", title="squidd", here="overview", csrf="x", **values)
        assert "Tokens per day by model" in page
        return (time.perf_counter() - started) * 1000

    first = await once()
    return first, statistics.median([await once() for _ in range(rounds)])


def run(sessions: int, rounds: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        fill(Path(tmp), sessions)
        return anyio.run(measure, Path(tmp), rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    first, median = run(args.sessions, args.rounds)
    print(
        f"overview, {args.sessions} sessions, {DAYS} days: first {first:.1f} ms, "
        f"median {median:.1f} ms (target <= {TARGET_MS:.0f} ms)"
    )


if __name__ == "__main__":
    main()
