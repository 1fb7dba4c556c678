"""The JSONL store: cursor files, safe names, torn lines, corrupt meta, locked appends from
several processes, atomic writes, and a turn's read cost independent of history length."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.core.models import Message, SessionId
from squidd.errors import StorageError
from squidd.fs import append_lines_locked, atomic_write_text, safe_name
from squidd.store.jsonl import JsonlStore

pytestmark = pytest.mark.anyio


def msg(i: int, role: str = "user") -> Message:
    return Message(role=role, content=f"m{i}")  # type: ignore[arg-type]


async def test_cursor_isolated_per_session(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    for sid in ("sess1", "sess2"):
        await store.append_messages(SessionId(sid), [msg(i) for i in range(30)])
    await store.save_consolidated_cursor(SessionId("sess1"), 10)
    await store.save_consolidated_cursor(SessionId("sess2"), 20)
    assert await store.load_consolidated_cursor(SessionId("sess1")) == 10
    assert await store.load_consolidated_cursor(SessionId("sess2")) == 20


async def test_cursor_file_created_in_sessions_dir(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(SessionId("matrix:room123"), [msg(1), msg(2)])
    await store.save_consolidated_cursor(SessionId("matrix:room123"), 1)
    meta = store.meta_path("matrix:room123")
    assert meta.parent == tmp_path / "sessions"
    assert meta.name.endswith(".meta.json")
    data = json.loads(meta.read_text())
    assert data["last_consolidated"] == 1
    assert data["session_id"] == "matrix:room123"


async def test_window_is_the_messages_after_the_cursor(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    sid = SessionId("s")
    await store.append_messages(sid, [msg(i) for i in range(10)])
    await store.save_consolidated_cursor(sid, 7)
    await store.append_messages(sid, [msg(10)])
    window = await store.load_window(sid)
    assert window.cursor == 7
    assert [m.content for m in window.messages] == ["m7", "m8", "m9", "m10"]


async def test_cursor_without_offset_is_located(tmp_path: Path) -> None:
    """A meta file in the documents' format ({"last_consolidated": N}) still works."""
    store = JsonlStore(tmp_path)
    sid = SessionId("s")
    await store.append_messages(sid, [msg(i) for i in range(5)])
    store.meta_path(sid).write_text('{"last_consolidated": 3}')
    assert [m.content for m in (await store.load_window(sid)).messages] == ["m3", "m4"]


async def test_window_does_not_read_consolidated_part(tmp_path: Path) -> None:
    """Garbage before the cursor's offset is never parsed: reading starts at the offset."""
    store = JsonlStore(tmp_path)
    sid = SessionId("s")
    await store.append_messages(sid, [msg(i) for i in range(4)])
    await store.save_consolidated_cursor(sid, 2)
    path = store.history_path(sid)
    data = path.read_bytes()
    offset = json.loads(store.meta_path(sid).read_text())["offset"]
    # Overwrite the consolidated lines with same-length junk: the window must not notice.
    junk = b"".join(b"x" * (len(line) - 1) + b"\n" for line in data[:offset].splitlines(True))
    path.write_bytes(junk + data[offset:])
    with capture_logs() as logs:
        window = await store.load_window(sid)
    assert [m.content for m in window.messages] == ["m2", "m3"]
    assert not [e for e in logs if e["event"] == "history_line_skipped"]


@pytest.mark.parametrize(
    "raw",
    ["../x", "/", "a/../../b", "\x00", "x" * 300, "ünïcödé-房间", "", ".", "..", ".hidden", "CON"],
)
def test_safe_name_stays_in_dir(raw: str, tmp_path: Path) -> None:
    name = safe_name(raw)
    assert "/" not in name and "\x00" not in name
    assert not name.startswith(".")
    assert len(name) <= 80
    assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_safe_name_never_collides() -> None:
    ids = ["a:b", "a__b", "a_b", "Room", "room", "ROOM", "a/b", "a\\b", "x" * 300, "x" * 301]
    names = [safe_name(i) for i in ids]
    assert len({n.lower() for n in names}) == len(ids)
    assert safe_name("a:b") == safe_name("a:b")


async def test_hostile_session_ids_stay_under_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = JsonlStore(data)
    for raw in ["../../etc/passwd", "/abs/path", "!room:server/../../x", "\x00nul", "😀" * 100]:
        sid = SessionId(raw)
        await store.append_messages(sid, [msg(1)])
        await store.save_session_summary(sid, "s")
        await store.save_consolidated_cursor(sid, 1)
    for path in tmp_path.rglob("*"):
        assert path.resolve().is_relative_to(data.resolve())


async def test_torn_last_line_is_skipped_with_warning(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    sid = SessionId("s")
    await store.append_messages(sid, [msg(1), msg(2)])
    with store.history_path(sid).open("ab") as handle:
        handle.write(b'{"role": "user", "content": "half a li')
    with capture_logs() as logs:
        window = await store.load_window(sid)
    assert [m.content for m in window.messages] == ["m1", "m2"]
    assert any(e["event"] == "history_line_skipped" for e in logs)
    # The next append starts on a fresh line; only the torn line is lost.
    await store.append_messages(sid, [msg(3)])
    with capture_logs():
        window = await store.load_window(sid)
    assert [m.content for m in window.messages] == ["m1", "m2", "m3"]


@pytest.mark.parametrize(
    "content", ["{not json", '{"last_consolidated": "many"}', "[]", '{"last_consolidated": -3}']
)
async def test_corrupt_meta_reads_as_cursor_zero(tmp_path: Path, content: str) -> None:
    store = JsonlStore(tmp_path)
    sid = SessionId("s")
    await store.append_messages(sid, [msg(i) for i in range(3)])
    store.meta_path(sid).write_text(content)
    with capture_logs() as logs:
        assert await store.load_consolidated_cursor(sid) == 0
        assert len((await store.load_window(sid)).messages) == 3
    assert any(e["event"] == "meta_file_corrupt" for e in logs)


async def test_meta_of_binary_garbage_reads_as_cursor_zero(tmp_path: Path) -> None:
    """Bytes that are not even UTF-8 are corruption too, not a reason to fail every turn."""
    store = JsonlStore(tmp_path)
    sid = SessionId("s")
    await store.append_messages(sid, [msg(i) for i in range(3)])
    store.meta_path(sid).write_bytes(b'\xff\xfe{"last_consolidated": 2}\x80')
    with capture_logs() as logs:
        assert await store.load_consolidated_cursor(sid) == 0
        assert len((await store.load_window(sid)).messages) == 3
    assert any(e["event"] == "meta_file_corrupt" for e in logs)


async def test_unreadable_file_names_the_file(tmp_path: Path) -> None:
    """Works as root too: a directory where the summary file should be cannot be read."""
    store = JsonlStore(tmp_path)
    sid = SessionId("s")
    store.summary_path(sid).mkdir(parents=True)
    with pytest.raises(StorageError) as info:
        await store.load_session_summary(sid)
    assert str(store.summary_path(sid)) in str(info.value)


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    for i in range(5):
        atomic_write_text(target, f"version {i}")
    assert target.read_text() == "version 4"
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]
    assert (target.stat().st_mode & 0o777) == 0o600


def _writer(path: str, worker: int, count: int) -> None:
    line = json.dumps({"role": "user", "content": f"w{worker}-" + "x" * 5000})
    for _ in range(count):
        append_lines_locked(Path(path), [line, line], fsync=False)


def test_two_processes_never_tear_or_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_writer, args=(str(path), w, 200)) for w in range(3)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
        assert p.exitcode == 0
    lines = path.read_bytes().splitlines()
    assert len(lines) == 3 * 200 * 2
    for line in lines:
        assert json.loads(line)["content"].endswith("x" * 5000)


async def test_search_history_finds_newest_first_with_snippets(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    sid = SessionId("s")
    await store.append_messages(
        sid,
        [
            Message(role="user", content="my dentist appointment is on monday"),
            Message(role="assistant", content="noted"),
            Message(role="user", content="move the Dentist to friday " + "filler " * 50),
        ],
    )
    await store.save_session_summary(sid, "Earlier: dentist is Dr. Who.")
    hits = await store.search_history(sid, "dentist", limit=5)
    assert [h.source for h in hits] == ["history", "history", "summary"]
    assert hits[0].snippet.startswith("move the Dentist")
    assert hits[0].snippet.endswith("…")
    assert await store.search_history(sid, "dentist monday", limit=5) == hits[1:2]
    assert len(await store.search_history(sid, "dentist", limit=1)) == 1
