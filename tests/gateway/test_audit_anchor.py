"""The audit head sent once a day to `anchor_to`: nothing while the log is empty, the head
(count and last hash) once the day has lines, not again the same day (nor after a restart,
the day is on disk), again the next day; a failed send is tried again."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from squidd.core.models import Destination
from squidd.gateway.audit_anchor import AuditAnchor
from squidd.store.audit import AuditFile
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


def _call(log: AuditFile, n: int) -> None:
    log.append_sync({"tool": "shell", "n_call": n})


async def test_the_head_goes_out_once_a_day(tmp_path: Path) -> None:
    log = AuditFile(tmp_path)
    channel = MemoryChannel("matrix")
    clock = [datetime(2026, 11, 25, 9, 0, tzinfo=UTC)]
    destination = Destination("matrix", "!owner:example.org")

    def anchor() -> AuditAnchor:
        return AuditAnchor(log, {"matrix": channel}, destination, now=lambda: clock[0])

    assert not await anchor().once()  # nothing logged yet
    _call(log, 1)
    _call(log, 2)
    channel.fail_sends = 1
    with pytest.raises(Exception, match="send failed"):
        await anchor().once()
    assert await anchor().once()
    head = log.read_head()
    assert head is not None
    [sent] = channel.sent
    assert sent.target == "!owner:example.org"
    assert sent.text == f"squidd audit head, 2026-11-25: 2 lines, last hash {head.hash}"
    _call(log, 3)
    assert not await anchor().once()  # same day, even from a new process
    clock[0] += timedelta(days=1)
    assert await anchor().once()
    assert channel.sent[-1].text.startswith("squidd audit head, 2026-11-26: 3 lines")
    state = json.loads((tmp_path / "audit" / "anchored.json").read_text())
    assert state["day"] == "2026-11-26" and state["lines"] == 3


async def test_the_daemon_sends_the_head_to_anchor_to(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log = AuditFile(data)
    _call(log, 1)
    settings = make_settings(
        data, "http://127.0.0.1:9/v1", tools={"audit": {"anchor_to": "matrix:!owner:example.org"}}
    )
    channel = MemoryChannel("matrix")
    async with running_daemon(settings, [channel]):
        await channel.wait_for(1)
    [sent] = channel.sent
    assert sent.target == "!owner:example.org" and "1 lines, last hash" in sent.text
