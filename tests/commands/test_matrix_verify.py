"""`squidd matrix verify` against a daemon's status socket (a StatusServer with the
verification ops of a fake channel): the listing with the emoji, the terminal's question
and its answer, --yes/--no, and a clear line when no daemon runs."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.cli import main
from squidd.gateway.status import StatusServer
from tests.support.cli import logging_back_to_defaults as logging_back_to_defaults
from tests.support.config import data_dir_config

FLOW = {
    "id": "txn-1",
    "user_id": "@alice:example.org",
    "device_id": "ALICEDEV",
    "room_id": None,
    "state": "keys",
    "emoji": [["🐶", "Dog"], ["🔧", "Spanner"]],
    "decimals": [1234, 5678, 4321],
    "age_s": 3.0,
    "cancel_code": None,
}


@pytest.fixture
def daemon() -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """A config whose data dir has a status socket answering the verification ops."""
    answers: list[dict[str, Any]] = []

    async def listing(request: Mapping[str, Any]) -> dict[str, Any]:
        return {"verifications": [FLOW]}

    async def verify(request: Mapping[str, Any]) -> dict[str, Any]:
        answers.append(dict(request))
        state = "confirmed" if request["match"] else "cancelled"
        return {"verification": {**FLOW, "state": state}}

    async def snapshot() -> dict[str, Any]:
        return {}

    with tempfile.TemporaryDirectory(prefix="sq-", dir="/tmp") as tmp:
        data = Path(tmp)
        config = data_dir_config(data, data)
        server = StatusServer(
            data / "squidd.sock",
            snapshot,
            {"matrix.verifications": listing, "matrix.verify": verify},
        )
        stop = threading.Event()
        started = threading.Event()

        async def serve() -> None:
            async with anyio.create_task_group() as tg:
                await tg.start(server.serve)
                started.set()
                await anyio.to_thread.run_sync(stop.wait)
                tg.cancel_scope.cancel()

        thread = threading.Thread(target=anyio.run, args=(serve,))
        thread.start()
        started.wait(30)
        try:
            yield config, answers
        finally:
            stop.set()
            thread.join(30)


def test_the_listing_shows_the_emoji_and_numbers(
    daemon: tuple[Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    config, answers = daemon
    assert main(["matrix", "verify", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "txn-1  @alice:example.org (device ALICEDEV): keys" in out
    assert "🐶 Dog  🔧 Spanner" in out and "1234 5678 4321" in out
    assert answers == []  # not a terminal, no --yes: nothing confirmed


def test_a_terminal_is_asked_and_its_yes_confirms(
    daemon: tuple[Path, list[dict[str, Any]]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, answers = daemon
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert main(["matrix", "verify", "--config", str(config)]) == 0
    assert answers == [{"op": "matrix.verify", "id": None, "match": True}]
    assert "confirmed" in capsys.readouterr().out


def test_no_cancels_the_named_one(
    daemon: tuple[Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    config, answers = daemon
    assert main(["matrix", "verify", "@alice:example.org", "--no", "--config", str(config)]) == 0
    assert answers == [{"op": "matrix.verify", "id": "@alice:example.org", "match": False}]


def test_without_a_daemon_it_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = data_dir_config(tmp_path, tmp_path)
    assert main(["matrix", "verify", "--yes", "--config", str(config)]) == 1
    assert "squidd is not running" in capsys.readouterr().err
