"""What the receive loop remembers across restarts, per mailbox folder.

* `uidvalidity`: UIDs are only meaningful under it; when the server changes it, the UIDs
  below are void and the folder is rescanned for unseen mail.
* `last_uid`: every mail up to it was looked at (answered, handed on, or ignored), so a
  restart neither misses new mail nor re-reads what it ignored.
* `pending`: UIDs handed to the router but not yet acknowledged (no reply sent yet). After a
  crash they are handed on again; the router's handled-id record keeps that from producing
  a second reply.
* `deferred`: UIDs held back by the rate limit, with their sender. `last_uid` moves past
  them, so they are kept here and handed on, oldest first, when the sender's window allows.
* `rate`: the rate limiter's counts (wall-clock times of the answers still inside the
  window, per sender; bounded by the limiter), so a restart does not reset them.

No file at all means squidd never looked at this folder: its first start there, when the
unseen mail already waiting is the backlog (`email.backlog`).

The file is replaced atomically on each change (a crash leaves the old or the new state).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog

from squidd.fs import atomic_write_text, safe_name

log = structlog.get_logger()


@dataclass
class FolderState:
    uidvalidity: int | None = None
    last_uid: int | None = None
    pending: set[int] = field(default_factory=set)
    deferred: dict[int, str] = field(default_factory=dict)
    rate: dict[str, list[float]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "uidvalidity": self.uidvalidity,
                "last_uid": self.last_uid,
                "pending": sorted(self.pending),
                "deferred": {str(uid): self.deferred[uid] for uid in sorted(self.deferred)},
                "rate": self.rate,
            }
        )


def state_path(data_dir: Path, account: str, folder: str) -> Path:
    """The state file of one account's folder; the name is safe whatever the inputs."""
    return data_dir / "email" / f"{safe_name(f'{account}|{folder}')}.json"


def _rate(raw: object) -> dict[str, list[float]]:
    """The saved rate-limit counts; what is not a list of numbers per sender is dropped
    (losing a count lets one more mail through, it never blocks one)."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, list[float]] = {}
    for sender, times in raw.items():
        if isinstance(sender, str) and isinstance(times, list):
            kept = [float(t) for t in times if isinstance(t, int | float) and math.isfinite(t)]
            if kept:
                out[sender] = kept
    return out


class StateFile:
    """The persisted `FolderState`; one writer at a time within the process."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = anyio.Lock()
        self.state = FolderState()
        self.found = False
        """Whether `load` found a file (False: the first start for this folder)."""

    async def load(self) -> FolderState:
        path = anyio.Path(self._path)
        try:
            raw = await path.read_text(encoding="utf-8")
        except FileNotFoundError:
            self.state = FolderState()
            self.found = False
            return self.state
        self.found = True
        try:
            data = json.loads(raw)
            self.state = FolderState(
                uidvalidity=None if data.get("uidvalidity") is None else int(data["uidvalidity"]),
                last_uid=None if data.get("last_uid") is None else int(data["last_uid"]),
                pending={int(u) for u in data.get("pending", [])},
                deferred={int(u): str(s) for u, s in (data.get("deferred") or {}).items()},
                rate=_rate(data.get("rate")),
            )
        except (ValueError, TypeError, AttributeError):
            # Starting over is safe: unseen mail is rescanned, handled ids prevent repeats.
            log.warning("email_state_unreadable", path=str(self._path))
            self.state = FolderState()
        return self.state

    async def save(self) -> None:
        async with self._lock:
            text = self.state.to_json()
            await anyio.to_thread.run_sync(atomic_write_text, self._path, text)
