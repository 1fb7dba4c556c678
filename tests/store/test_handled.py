"""The record of handled message ids: what a restart reads back."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.store.handled import HandledFile

pytestmark = pytest.mark.anyio


async def test_a_timestamp_without_zone_does_not_stop_the_daemon(tmp_path: Path) -> None:
    """A line edited by hand (or by an older tool) with a naive time reads as UTC; before,
    comparing it with the aware cut-off raised and the daemon could not start at all."""
    path = tmp_path / "gateway" / "handled.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"channel":"c","id":"naive","at":"2999-01-01T00:00:00"}\n'
        '{"channel":"c","id":"garbled",\n'
        '{"channel":"c","id":"aware","at":"2999-01-01T00:00:00+00:00"}\n'
    )
    handled = HandledFile(tmp_path)
    with capture_logs() as logs:
        assert await handled.load() == 2
    assert await handled.contains("c", "naive")
    assert await handled.contains("c", "aware")
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["handled_line_skipped"]
