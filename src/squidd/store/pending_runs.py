"""Scheduled runs (cron jobs, heartbeats) fired but not yet answered, one JSON file each.

`<data dir>/gateway/runs/<safe name of channel + source id>.json` is written atomically
before a run is handed to the router and removed when the router acknowledges it (its reply
was delivered, or it needed none). After a crash in between, the daemon hands the run to the
router again at start; the router's handled-id record keeps it from being answered twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from squidd.core.models import InboundKind
from squidd.core.runs import PendingRun
from squidd.store.json_dir import JsonDir
from squidd.store.records import Codec, Text

RUN: Codec[PendingRun] = Codec(PendingRun, fields={"subject": Text})

_SUBAGENT_KINDS = frozenset({InboundKind.SUBAGENT.value, InboundKind.SUBAGENT_REPORT.value})


def dump_run(run: PendingRun) -> dict[str, Any]:
    """A run's file; `channel` too, which versions before `kind` read."""
    return {**RUN.dump(run), "channel": run.channel}


def load_run(data: Any) -> PendingRun:
    """A run's file, older layouts too: files from before the typed fields kept
    `quiet_reply` and the job's name (the subject) in a `meta` object; files from before
    `kind` name it by their channel, and a sub-agent's run its conversation's channel by
    its source id (`<channel>:<id>`)."""
    if not isinstance(data, Mapping):
        raise TypeError("a run is an object")
    record = dict(data)
    legacy = record.pop("meta", None) or {}
    if not isinstance(legacy, Mapping):
        raise TypeError("meta must be an object")
    record.setdefault("quiet_reply", legacy.get("quiet_reply"))
    record.setdefault("subject", legacy.get("job") or "")
    record["kind"] = record.get("kind") or record["channel"]
    if "conversation_channel" not in record and record["kind"] in _SUBAGENT_KINDS:
        record["conversation_channel"] = str(record["source_id"]).rsplit(":", 1)[0]
    return RUN.load(record)


class PendingRunsDir:
    def __init__(self, data_dir: Path) -> None:
        self._records = JsonDir(data_dir / "gateway" / "runs", kind="pending_run", decode=load_run)

    async def put(self, run: PendingRun) -> None:
        await self._records.put(run.channel, run.source_id, dump_run(run))

    async def remove(self, channel: str, source_id: str) -> None:
        await self._records.remove(channel, source_id)

    async def load(self) -> list[PendingRun]:
        """Runs fired before the last stop and not acknowledged, oldest name first."""
        return await self._records.load()
