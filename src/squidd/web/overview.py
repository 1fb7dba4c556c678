"""The overview's values: the daemon's snapshot (what `squidd status` prints), the waiting
approvals and the cron jobs, turned into plain rows a template lays out as tables.

Nothing here is markup: the template (pages/overview.html) writes every value, escaped.
A nested value of the snapshot is never dumped as it is; each part is read by its known
fields, so a page shows a table, never a JSON document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from squidd.llm.health import model_lines
from squidd.store.cron_deliveries import CronDeliveries, delivery_note
from squidd.web.charts import cap_bars, timing_charts, usage_charts
from squidd.web.host import DashboardHost
from squidd.web.render import words
from squidd.web.timing_days import TimingDays
from squidd.web.usage_days import UsageDays


def _children(snap: Mapping[str, Any]) -> list[dict[str, str]]:
    return [
        {
            "name": words(c.get("name", "")),
            "state": words(c.get("state", "")),
            "since": words(c.get("since", "")),
            "restarts": words(c.get("restarts", 0)),
            "detail": words(c.get("detail", "")),
        }
        for c in snap.get("children") or []
    ]


def _denied(snap: Mapping[str, Any]) -> list[dict[str, str]]:
    return [
        {
            "session": words(job.get("session", "")),
            "tools": words(job.get("tools") or []),
            "denied": words(job.get("denied", 0)),
            "last": words(job.get("last") or ""),
            "fix": words(job.get("fix", "")),
        }
        for job in snap.get("unattended_denied") or []
    ]


async def _jobs(host: DashboardHost) -> list[dict[str, Any]]:
    # Each job with its next run, read from the jobs file: right after a change made on
    # the dashboard, the scheduler may not have reloaded it yet.
    jobs = await host.cron.jobs()
    deliveries = await anyio.to_thread.run_sync(CronDeliveries(host.data_dir).read_sync)
    return [
        {
            "name": j.name,
            "when": j.describe(),
            "prompt": j.prompt[:200],
            "next_run": j.next_run or "",
            "paused": j.paused,
            "delivery": delivery_note(deliveries.get(j.name)) or "-",
        }
        for j in jobs
    ]


async def overview(
    host: DashboardHost, snap: Mapping[str, Any], history: UsageDays, times: TimingDays
) -> dict[str, Any]:
    """The overview template's values."""
    usage = {"day": "", "calls": 0, "prompt_tokens": 0, "cached_tokens": 0}
    usage |= {"completion_tokens": 0, "total_tokens": 0, "cost": 0.0}
    usage |= dict(snap.get("usage_today") or {})
    waiting = await host.approvals_waiting()
    return {
        "children": _children(snap),
        "model_lines": model_lines(snap.get("model")),
        "turns": {
            k: (snap.get("turns") or {}).get(k, 0) for k in ("in_flight", "queued", "sessions")
        },
        "approvals": [{"id": q.id, "session": q.session, "prompt": q.prompt()} for q in waiting],
        "jobs": await _jobs(host),
        "denied": _denied(snap),
        "heartbeat": snap.get("heartbeat") or "",
        "usage": usage,
        "charts": usage_charts(await history.last()) + timing_charts(await times.last()),
        "caps": cap_bars(snap.get("limits") or []),
        "parked": {"count": 0, "newest_id": "", "newest_at": "", "newest_reason": ""}
        | dict(snap.get("parked") or {}),
    }
