"""Windows kept parsed between turns (store/windows.py): what a turn reads is always what
the file holds, whoever appended it, after a new cursor, a torn line or a replaced file; and
a window read again parses only what was appended."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import squidd.store.windows as windows
from squidd.core.models import Message, SessionId
from squidd.fs import append_lines_locked, atomic_write_text
from squidd.store.jsonl import JsonlStore
from squidd.store.records import MESSAGE

pytestmark = pytest.mark.anyio

S = SessionId("s")


def msg(i: int) -> Message:
    return Message(role="user", content=f"m{i}")


def contents(messages: list[Message]) -> list[str | None]:
    return [m.content for m in messages]


class Counting:
    """Counts the history lines parsed (windows.MESSAGE.loads)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lines = 0
        loads = MESSAGE.loads

        def counted(raw: bytes | str) -> Message:
            self.lines += 1
            return loads(raw)

        monkeypatch.setattr(windows.MESSAGE, "loads", counted)


async def test_a_window_read_again_parses_only_what_was_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(S, [msg(i) for i in range(10)])
    counting = Counting(monkeypatch)
    assert contents((await store.load_window(S)).messages) == [f"m{i}" for i in range(10)]
    assert counting.lines == 10
    assert len((await store.load_window(S)).messages) == 10
    assert counting.lines == 10  # unchanged: nothing parsed
    await store.append_messages(S, [msg(10), msg(11)])
    window = await store.load_window(S)
    assert contents(window.messages) == [f"m{i}" for i in range(12)]
    assert counting.lines == 12


async def test_lines_appended_by_another_writer_and_a_new_cursor_are_seen(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    await store.append_messages(S, [msg(i) for i in range(6)])
    await store.load_window(S)
    # Another process (a CLI command) appends: the same file, grown.
    append_lines_locked(store.history_path(S), [MESSAGE.dumps(msg(6))])
    assert contents((await store.load_window(S)).messages)[-1] == "m6"
    await store.save_consolidated_cursor(S, 4)
    window = await store.load_window(S)
    assert (window.cursor, contents(window.messages)) == (4, ["m4", "m5", "m6"])


async def test_a_torn_line_completed_later_is_read_and_a_replaced_file_read_anew(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    path = store.history_path(S)
    await store.append_messages(S, [msg(0)])
    with path.open("a") as handle:
        handle.write(MESSAGE.dumps(msg(1))[:8])  # a writer died mid-line
    assert contents((await store.load_window(S)).messages) == ["m0"]
    await store.append_messages(S, [msg(2)])  # terminates the torn line, then appends
    assert contents((await store.load_window(S)).messages) == ["m0", "m2"]
    # Replaced as a whole (a restore): a new file, read from its start.
    atomic_write_text(path, MESSAGE.dumps(msg(9)) + "\n")
    assert contents((await store.load_window(S)).messages) == ["m9"]
    os.unlink(path)
    assert (await store.load_window(S)).messages == []


async def test_only_the_sessions_read_last_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = windows.WindowCache(max_windows=2)
    paths = []
    for name in ("a", "b", "c"):
        path = tmp_path / f"{name}.jsonl"
        append_lines_locked(path, [MESSAGE.dumps(msg(0)), MESSAGE.dumps(msg(1))])
        paths.append(path)
    counting = Counting(monkeypatch)
    for path in paths:
        cache.messages(path, 0)
    assert counting.lines == 6
    cache.messages(paths[2], 0)
    cache.messages(paths[1], 0)
    assert counting.lines == 6  # the last two are kept
    cache.messages(paths[0], 0)
    assert counting.lines == 8  # the first was dropped: parsed again


async def test_a_damaged_line_is_logged_once_not_at_every_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged whole line (garbage, or a torn line terminated by the next append) is
    skipped and logged when first read; the next turns read only what was appended after
    it, in order, and say nothing more about it."""
    store = JsonlStore(tmp_path)
    path = store.history_path(S)
    await store.append_messages(S, [msg(0)])
    append_lines_locked(path, ['{"role": "user", "content": 5, "broken'])
    assert contents((await store.load_window(S)).messages) == ["m0"]
    with path.open("a") as handle:
        handle.write(MESSAGE.dumps(msg(1))[:8])  # and a writer died mid-line after it
    for turn in range(2, 5):
        await store.append_messages(S, [msg(turn)])
        assert contents((await store.load_window(S)).messages) == ["m0"] + [
            f"m{i}" for i in range(2, turn + 1)
        ]
    # a fresh reader (a restart) sees the same, each damaged line once
    fresh = JsonlStore(tmp_path)
    assert contents((await fresh.load_window(S)).messages) == ["m0", "m2", "m3", "m4"]
    skipped = [
        line for line in capsys.readouterr().out.splitlines() if "history_line_skipped" in line
    ]
    offsets = [line.split("offset=")[1].split()[0] for line in skipped]
    garbage, torn = offsets[0], offsets[1]
    # each damaged line once as the daemon read on (the torn one once terminated: no read
    # came while it was torn), then once each by the fresh reader
    assert offsets == [garbage, torn, garbage, torn]
    assert not any("torn last line" in line for line in skipped)
