"""The verification flows in progress, kept on disk so that a restart ends them cleanly.

`verifications.json` in the Matrix channel's data folder (0600, replaced atomically) holds
each flow that is not finished: its id, the person, her device, the room (in-room flows),
its state and when it began (wall clock, so its 10 minutes count across a restart). It is
rewritten when the set of flows or a state changes, never for an unchanged set.

What a restart can honestly resume: a flow that was `ready` (the bot has answered her
request, no secret exists yet) goes on when her `start` comes. From `started` on, the
exchange's ephemeral Curve25519 secret lives in vodozemac's `Sas`, which cannot be saved
(no pickling, no export): such a flow is cancelled after the restart, her client is told
why, and the person is asked in the DM to start again (`Verifications.end_interrupted`).

An unreadable or malformed file loses nothing that matters (a flow is at most 10 minutes
of a person's patience): it is logged and read as empty; a bad record is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.errors import StorageError
from squidd.fs import atomic_write_text, read_text_or_empty

log = structlog.get_logger()

FILE_NAME = "verifications.json"
VERSION = 1
STATES = ("requested", "ready", "started", "keys", "confirmed", "interrupted")
RESUMABLE = ("requested", "ready")


@dataclass(frozen=True, slots=True)
class KeptFlow:
    id: str
    user_id: str
    device_id: str
    room_id: str | None
    state: str
    started_at: float  # seconds since the epoch

    @classmethod
    def parse(cls, raw: Any) -> KeptFlow | None:
        """The record `raw` stands for, or None when any field is missing or wrong."""
        if not isinstance(raw, Mapping):
            return None
        texts = [raw.get(k) for k in ("id", "user_id", "device_id", "state")]
        room, started = raw.get("room_id"), raw.get("started_at")
        if not all(isinstance(t, str) and t for t in texts) or raw.get("state") not in STATES:
            return None
        if not (room is None or (isinstance(room, str) and room)):
            return None
        if isinstance(started, bool) or not isinstance(started, int | float):
            return None
        flow_id, user_id, device_id, state = (str(t) for t in texts)
        return cls(flow_id, user_id, device_id, room, state, float(started))


class FlowFile:
    """The file of one Matrix account's flows in progress."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written: tuple[KeptFlow, ...] | None = None

    async def load(self) -> list[KeptFlow]:
        try:
            text = await anyio.to_thread.run_sync(read_text_or_empty, self.path)
            data = json.loads(text) if text.strip() else {"version": VERSION, "flows": []}
        except (StorageError, ValueError) as exc:
            log.warning("matrix_verification_file_unreadable", path=str(self.path), reason=str(exc))
            return []
        raw = data.get("flows") if isinstance(data, Mapping) else None
        if not isinstance(raw, list) or data.get("version") != VERSION:
            log.warning("matrix_verification_file_unreadable", path=str(self.path), reason="form")
            return []
        flows = [KeptFlow.parse(item) for item in raw]
        if None in flows:
            log.warning("matrix_verification_record_skipped", count=flows.count(None))
        kept = [f for f in flows if f is not None]
        self._written = tuple(kept)
        return kept

    async def save(self, flows: Iterable[KeptFlow]) -> None:
        """Replace the file with `flows`, unless that is what it holds already."""
        records = tuple(flows)
        if records == self._written:
            return
        text = json.dumps(
            {"version": VERSION, "flows": [asdict(r) for r in records]}, ensure_ascii=False
        )
        await anyio.to_thread.run_sync(atomic_write_text, self.path, text + "\n")
        self._written = records
