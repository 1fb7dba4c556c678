"""SIGKILL of `squidd run` while its recall indexer embeds: after a restart the index holds
every message exactly once, and a batch cut short between its rows and the state (rows
written past the committed count) is dropped and embedded again, never kept twice.

The scripted `/v1/embeddings` server holds the fourth request, so the daemon is killed with
three batches committed and a fourth in flight; the rows a batch writes before its state
is saved are then added by hand (as if the kill had come between the two). The restarted
daemon's indexer resumes from its cursors.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import anyio
import pytest

from squidd.core.models import Message, SessionId
from squidd.store.jsonl import JsonlStore
from tests.support.config import write_daemon_config
from tests.support.daemon import SPOOL, DaemonProcess
from tests.support.fake_embeddings import DIM, EmbeddingsServer

pytestmark = pytest.mark.anyio

BATCH = 100
SESSIONS, PER_SESSION = 4, 250


def plant(data: Path) -> set[str]:
    store = JsonlStore(data)
    texts: set[str] = set()
    for s in range(SESSIONS):
        said = [
            Message(role="user", content=f"session {s} message {i}", by="ann")
            for i in range(PER_SESSION)
        ]
        texts |= {m.content or "" for m in said}
        anyio.run(store.append_messages, SessionId(f"mail:s{s}"), said)
    return texts


def recall_state(data: Path) -> dict[str, object]:
    return dict(json.loads((data / "index" / "recall" / "state.json").read_text()))


async def test_an_indexer_killed_midway_resumes_without_a_row_twice_or_missing(
    tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    data = tmp_path / "data"
    texts = await anyio.to_thread.run_sync(plant, data)
    with EmbeddingsServer(pause_at=4) as server:
        config = write_daemon_config(
            tmp_path,
            server.base_url,
            api_key="sk-test-recall-kill",
            memory={"recall": {"embeddings": f"default/{server.model}", "batch": BATCH}},
        )
        first = DaemonProcess(config, tmp_path / "first.log", channel=SPOOL)
        daemons.append(first)
        assert await anyio.to_thread.run_sync(server.paused.wait, 120)
        first.kill()
        index = data / "index" / "recall"
        assert recall_state(data)["rows"] == 3 * BATCH  # three batches committed
        # A batch cut short after its rows and before its state: rows past the count.
        for name, junk in (("history.f32", 7 * 4 * DIM), ("history.q8", 7 * DIM)):
            with (index / name).open("ab") as handle:
                handle.write(b"\x01" * junk)
        with (index / "history.jsonl").open("ab") as handle:
            handle.write(b'{"source": "history", "session": "mail:s9", "index": 0, "te')

        server.pause_at = None
        server.release.set()
        second = DaemonProcess(config, tmp_path / "second.log", channel=SPOOL)
        daemons.append(second)
        await second.wait_log('"total": 1000')
        assert await second.stop() == 0

    state = recall_state(data)
    assert state["rows"] == SESSIONS * PER_SESSION
    assert (index / "history.f32").stat().st_size == 4 * DIM * SESSIONS * PER_SESSION
    assert (index / "history.q8").stat().st_size == DIM * SESSIONS * PER_SESSION
    rows = [json.loads(line) for line in (index / "history.jsonl").read_text().splitlines()]
    places = Counter((row["session"], row["index"]) for row in rows)
    expected = {(f"mail:s{s}", i) for s in range(SESSIONS) for i in range(PER_SESSION)}
    assert set(places) == expected and max(places.values()) == 1  # each once, none missing
    assert {row["text"] for row in rows} == texts
    embedded = Counter(server.inputs)
    assert set(embedded) == texts
    # Only the batch in flight at the kill was embedded twice (not stored twice).
    assert sum(count - 1 for count in embedded.values()) <= BATCH
