"""The outbox on disk: the layout existing data dirs use, torn or foreign files, hostile ids."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from squidd.core.models import PendingReply, SessionId
from squidd.core.reply_files import FileRef
from squidd.errors import StorageError
from squidd.store.outbox import OutboxDir

pytestmark = pytest.mark.anyio

REPLY = PendingReply("matrix", "!room:example.org", "hello ✓", SessionId("matrix:!room"), "")
# The entry of REPLY as every version wrote it (files since they exist).
REPLY_FIELDS = {
    "channel": "matrix",
    "target": "!room:example.org",
    "text": "hello ✓",
    "session_id": "matrix:!room",
    "subject": "",
    "files": [],
}

# The name an entry for ("matrix", "$ev1:example.org") has always had on disk.
OLD_NAME = "matrix_ev1_example.org-e46df382d8b1e210de48.json"


def outbox_dir(data: Path) -> Path:
    return data / "gateway" / "outbox"


async def test_an_entry_written_before_this_version_is_read(tmp_path: Path) -> None:
    """A data dir from a running installation: its outbox file is found and read."""
    outbox_dir(tmp_path).mkdir(parents=True)
    (outbox_dir(tmp_path) / OLD_NAME).write_text(
        '{\n "channel": "matrix",\n "target": "!room:example.org",\n "text": "hello \u2713",\n'
        ' "session_id": "matrix:!room",\n "subject": "",\n "source_channel": "matrix",\n'
        ' "source_id": "$ev1:example.org"\n}',
        encoding="utf-8",
    )
    outbox = OutboxDir(tmp_path)
    assert await outbox.get("matrix", "$ev1:example.org") == REPLY
    assert await outbox.count() == 1


async def test_put_writes_the_layout_older_versions_read(tmp_path: Path) -> None:
    outbox = OutboxDir(tmp_path)
    await outbox.put("matrix", "$ev1:example.org", REPLY)
    assert [p.name for p in outbox_dir(tmp_path).iterdir()] == [OLD_NAME]
    text = (outbox_dir(tmp_path) / OLD_NAME).read_text(encoding="utf-8")
    assert json.loads(text) == {
        **REPLY_FIELDS,
        "source_channel": "matrix",
        "source_id": "$ev1:example.org",
    }
    assert "hello ✓" in text  # UTF-8, not \u escapes


async def test_put_get_remove_and_count(tmp_path: Path) -> None:
    outbox = OutboxDir(tmp_path)
    assert await outbox.count() == 0  # no directory yet
    assert await outbox.get("c", "1") is None
    await outbox.put("c", "1", REPLY)
    await outbox.put("c", "2", REPLY)
    assert await outbox.count() == 2
    await outbox.remove("c", "1")
    await outbox.remove("c", "1")  # already gone: not an error
    assert await outbox.get("c", "1") is None
    assert await outbox.get("c", "2") == REPLY
    assert await outbox.count() == 1


async def test_a_garbage_entry_is_an_error_naming_the_file_and_is_kept(tmp_path: Path) -> None:
    """A torn or foreign file is not taken for "no reply" (which would run the model again
    and answer twice); it stays for a human to look at."""
    outbox = OutboxDir(tmp_path)
    await outbox.put("c", "torn", REPLY)
    (path,) = outbox_dir(tmp_path).iterdir()
    path.write_text('{"channel": "c", "tar')
    with pytest.raises(StorageError, match=re.escape(path.name)):
        await outbox.get("c", "torn")
    path.write_text('["not", "a", "reply"]')
    with pytest.raises(StorageError, match="not a pending reply"):
        await outbox.get("c", "torn")
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(StorageError, match="not UTF-8"):
        await outbox.get("c", "torn")
    assert path.exists()


async def test_an_empty_file_reads_as_no_entry(tmp_path: Path) -> None:
    outbox = OutboxDir(tmp_path)
    await outbox.put("c", "empty", REPLY)
    (path,) = outbox_dir(tmp_path).iterdir()
    path.write_text("")
    assert await outbox.get("c", "empty") is None


@pytest.mark.parametrize(
    "source_id", ["../../escape", "/etc/passwd", "a/b", "..", "Ev", "ev", "x" * 500, "\x00"]
)
async def test_hostile_source_ids_stay_inside_and_apart(tmp_path: Path, source_id: str) -> None:
    outbox = OutboxDir(tmp_path)
    await outbox.put("c", source_id, REPLY)
    await outbox.put("c", "ev", PendingReply("c", "t", "other", SessionId("s")))
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert all(p.parent == outbox_dir(tmp_path) for p in files)
    assert len(files) == (1 if source_id == "ev" else 2)
    if source_id != "ev":
        assert await outbox.get("c", source_id) == REPLY
    await outbox.remove("c", source_id)
    assert await outbox.get("c", source_id) is None


async def test_the_channel_is_part_of_the_key(tmp_path: Path) -> None:
    outbox = OutboxDir(tmp_path)
    await outbox.put("matrix", "1", REPLY)
    assert await outbox.get("email", "1") is None


async def test_a_removal_that_fails_is_a_storage_error(tmp_path: Path) -> None:
    outbox = OutboxDir(tmp_path)
    path = outbox_dir(tmp_path)
    await outbox.put("c", "dir", REPLY)
    (entry,) = path.iterdir()
    entry.unlink()
    entry.mkdir()  # something that cannot be unlinked as a file
    with pytest.raises(StorageError, match="cannot remove"):
        await outbox.remove("c", "dir")


async def test_a_message_without_an_entry_costs_no_file_operation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every new message asks the outbox for its reply and finds none: after one listing
    the daemon (the outbox's only writer) answers that from memory. Entries written by it
    or found at start are still read from their files."""
    outbox_dir(tmp_path).mkdir(parents=True)
    (outbox_dir(tmp_path) / OLD_NAME).write_text(
        json.dumps({**REPLY_FIELDS, "source_channel": "matrix", "source_id": "$ev1:example.org"}),
        encoding="utf-8",
    )
    outbox = OutboxDir(tmp_path)
    assert await outbox.get("matrix", "$new:example.org") is None  # lists the directory once
    hops: list[object] = []
    real = anyio.to_thread.run_sync

    async def counting(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    assert await outbox.get("matrix", "$other:example.org") is None
    await outbox.remove("matrix", "$other:example.org")
    assert hops == []
    assert await outbox.get("matrix", "$ev1:example.org") == REPLY
    await outbox.put("c", "1", REPLY)
    assert await outbox.get("c", "1") == REPLY
    await outbox.remove("c", "1")
    assert await outbox.get("c", "1") is None
    assert await outbox.count() == 1


async def test_a_voice_note_of_a_reply_round_trips_whole(tmp_path: Path) -> None:
    voice = FileRef(
        path=str(tmp_path / "media" / "a.ogg"),
        kind="voice",
        mime="audio/ogg",
        size=2048,
        sha256="ab" * 32,
        name="answer.ogg",
        duration_ms=2750,
        waveform=(0, 512, 1024, 7),
    )
    reply = PendingReply("matrix", "!r:x", "spoken", SessionId("matrix:!r"), "", (voice,))
    outbox = OutboxDir(tmp_path)
    await outbox.put("matrix", "$ev2:x", reply)
    assert await outbox.get("matrix", "$ev2:x") == reply
    assert await OutboxDir(tmp_path).get("matrix", "$ev2:x") == reply
