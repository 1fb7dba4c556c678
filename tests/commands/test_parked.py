"""`squidd parked list|retry ID|drop ID` and the parked lines of `squidd status`, on a data
dir with parked items and no daemon running (the daemon's side is in tests/gateway and the
fault test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.cli import main
from squidd.commands.status import format_status
from squidd.core.models import ChannelName, Inbound, PendingReply, SessionId, SourceId
from squidd.core.poison import Parked, ParkState
from squidd.store.parked import ParkedDir
from tests.support.cli import logging_back_to_defaults as logging_back_to_defaults
from tests.support.config import data_dir_config


def _config(tmp_path: Path) -> Path:
    return data_dir_config(tmp_path)


def _item(n: int, *, inbound: bool = True) -> Parked:
    return Parked(
        id=f"{n:012x}",
        loop="message" if inbound else "undecrypted",
        channel="email",
        source_id=f"<m{n}@x>",
        session_id="alice@x",
        reason=f"UnicodeEncodeError: surrogates not allowed {n}",
        error="UnicodeEncodeError",
        attempts=3,
        inbound=Inbound(ChannelName("email"), SourceId(f"<m{n}@x>"), SessionId("a"), "a", "hi")
        if inbound
        else None,
        reply=PendingReply("email", "alice@x", "hi", SessionId("alice@x")),
    )


def test_list_shows_each_item_and_an_empty_folder_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    assert main(["--config", str(config), "parked", "list"]) == 0
    assert "no parked messages" in capsys.readouterr().out
    folder = ParkedDir(tmp_path / "data")
    folder.park_sync(_item(1))
    folder.park_sync(_item(2))
    assert main(["--config", str(config), "parked", "list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 parked")
    assert _item(1).id in out and _item(2).id in out
    assert "3 attempts, reply kept: UnicodeEncodeError: surrogates not allowed 2" in out


def test_retry_marks_the_item_once_and_drop_removes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    folder = ParkedDir(tmp_path / "data")
    folder.park_sync(_item(1))
    assert main(["--config", str(config), "parked", "retry", _item(1).id]) == 0
    assert "will be sent again" in capsys.readouterr().out
    assert folder.get_sync(_item(1).id).state is ParkState.RETRY
    assert main(["--config", str(config), "parked", "retry", _item(1).id]) == 0
    assert "already being sent again" in capsys.readouterr().out
    assert folder.get_sync(_item(1).id).state is ParkState.RETRY
    assert main(["--config", str(config), "parked", "drop", _item(1).id]) == 0
    assert folder.list_sync() == []


def test_unknown_ids_unretryable_items_and_running_retries_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    folder = ParkedDir(tmp_path / "data")
    folder.park_sync(_item(1, inbound=False))
    folder.park_sync(_item(2))
    folder.change_sync(_item(2).id, lambda p: p.with_state(ParkState.RETRYING, retries=1))
    assert main(["--config", str(config), "parked", "retry", "0123456789ab"]) == 1
    assert "no parked message" in capsys.readouterr().err
    assert main(["--config", str(config), "parked", "retry", "../../etc"]) == 1
    assert main(["--config", str(config), "parked", "retry", _item(1).id]) == 1
    assert "cannot be sent again" in capsys.readouterr().err
    assert folder.get_sync(_item(1).id).state is ParkState.PARKED
    assert main(["--config", str(config), "parked", "drop", _item(2).id]) == 1
    assert "being sent again right now" in capsys.readouterr().err
    assert len(folder.list_sync()) == 2


def test_status_without_a_daemon_still_shows_the_parked_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    ParkedDir(tmp_path / "data").park_sync(_item(1))
    assert main(["--config", str(config), "status"]) == 1
    err = capsys.readouterr().err
    assert "not running" in err
    assert "parked: 1 (see `squidd parked list`)" in err
    assert "surrogates not allowed 1" in err


def test_status_shows_the_parked_count_and_the_newest_reason() -> None:
    base = {"version": "x", "pid": 1, "uptime_s": 3}
    parked = {
        "count": 2,
        "newest_reason": "ValueError: bad",
        "newest_id": "abc",
        "newest_at": "2026-11-25T10:00:00+00:00",
    }
    text = format_status({**base, "parked": parked})
    assert "parked: 2 (see `squidd parked list`); newest abc at 2026-11-25T10:00:00+00:00: " in text
    assert text.rstrip().count("ValueError: bad") == 1
    assert "parked: 0" in format_status({**base, "parked": {"count": 0}})
    assert "parked" not in format_status(base)
