"""A test-only channel for a real `squidd run` subprocess: messages in, replies out, as files.

Handed to the builder by `tests/support/run_with_channel.py` (`DaemonProcess(...,
channel=SPOOL)`), with the repository root on PYTHONPATH. A test drops
`<data dir>/spool/in/<id>.json` (`{"session": ..., "sender": ..., "text": ...}`, written
atomically); each reply is written to `<data dir>/spool/out/<id>.<random>.json`, so a
reply sent twice shows up as two files.
Acknowledging a message moves its file to `spool/done/` - until then, a restarted daemon
picks it up again, the way an unseen mail or an unconfirmed sync position would come back.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import anyio
from anyio.abc import TaskStatus

from squidd.config import Settings
from squidd.core.models import Inbound, Outbound, SessionId
from squidd.core.ports import ChannelState, Inbox
from squidd.errors import DeliveryError


def write_atomic(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


class SpoolChannel:
    def __init__(self, root: Path, *, name: str = "spool", poll_s: float = 0.05) -> None:
        self._root = root
        self._name = name
        self._poll_s = poll_s
        self._queued: set[str] = set()

    @property
    def name(self) -> str:
        return self._name

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        incoming = anyio.Path(self._root / "in")
        await incoming.mkdir(parents=True, exist_ok=True)
        await anyio.Path(self._root / "done").mkdir(parents=True, exist_ok=True)
        task_status.started()
        inbox.report(ChannelState.CONNECTED, str(self._root))
        while True:
            names = sorted([p.name async for p in incoming.glob("*.json")])
            for name in names:
                if name in self._queued:
                    continue
                try:
                    data = json.loads(await (incoming / name).read_text(encoding="utf-8"))
                except FileNotFoundError:  # acknowledged (moved) since the listing
                    continue
                self._queued.add(name)
                await inbox.put(self._inbound(name, data))
            await anyio.sleep(self._poll_s)

    def _inbound(self, name: str, data: dict[str, str]) -> Inbound:
        source = self._root / "in" / name
        done = self._root / "done" / name

        async def ack() -> None:
            await anyio.Path(source).rename(done)
            self._queued.discard(name)

        return Inbound(
            channel=self._name,
            source_id=name.removesuffix(".json"),
            session_id=SessionId(data.get("session", "spool")),
            sender=data.get("sender", "tester"),
            text=data["text"],
            ack=ack,
        )

    async def send(self, outbound: Outbound) -> None:
        source = outbound.in_reply_to.source_id if outbound.in_reply_to else "scheduled"
        path = self._root / "out" / f"{source}.{uuid.uuid4().hex[:8]}.json"
        data: dict[str, object] = {
            "target": outbound.target,
            "text": outbound.text,
            "session": outbound.session_id,
            "in_reply_to": None if outbound.in_reply_to is None else source,
        }
        try:
            await anyio.to_thread.run_sync(write_atomic, path, data)
        except OSError as exc:
            raise DeliveryError(f"cannot write a reply file: {exc.strerror}") from exc


def create_channel(settings: Settings) -> SpoolChannel:
    return SpoolChannel(settings.storage.data_dir / "spool")
