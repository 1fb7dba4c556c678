"""The media store: content-addressed names, hostile names, the size cap, the lifetime."""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squidd.fs import display_name
from squidd.store.media import TOO_LARGE, MediaStore

pytestmark = pytest.mark.anyio

HOSTILE = [
    "../../../etc/passwd",
    "..",
    "/abs/olute.png",
    "a\x00b.png",
    "x" * 10_000 + ".pdf",
    "..\\..\\win.txt",
    "name.png\x00.exe",
    "\ud800.txt",
]


async def chunks(data: bytes, size: int = 7) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


async def test_a_file_is_stored_by_its_hash_under_the_session(tmp_path: Path) -> None:
    store = MediaStore(tmp_path / "data", lifetime_s=3600)
    data = b"%PDF-1.4 hello"
    att = await store.save(
        "matrix:!room:x",
        kind="file",
        name="Report.PDF",
        mime="application/pdf",
        chunks=chunks(data),
        max_bytes=1000,
    )
    digest = hashlib.sha256(data).hexdigest()
    assert att.sha256 == digest and att.size == len(data) and att.note == ""
    assert att.path == str(store.session_dir("matrix:!room:x") / f"{digest}.pdf")
    assert Path(att.path).read_bytes() == data
    assert all_files(tmp_path) == [Path(att.path)]


@pytest.mark.parametrize("name", HOSTILE)
async def test_nothing_is_written_outside_the_data_dir(tmp_path: Path, name: str) -> None:
    data_dir = tmp_path / "data"
    store = MediaStore(data_dir, lifetime_s=3600)
    att = await store.save(
        "email:" + name,
        kind="file",
        name=name,
        mime="text/plain",
        chunks=chunks(b"content"),
        max_bytes=1000,
    )
    assert att.path is not None
    kept = Path(att.path).resolve()
    assert kept.is_relative_to((data_dir / "media").resolve())
    assert all_files(tmp_path) == [Path(att.path)]
    assert len(kept.name) < 80 and "\x00" not in att.name and "/" not in att.name
    assert len(att.name) <= 120


async def test_over_the_cap_nothing_is_kept_and_the_note_says_too_large(tmp_path: Path) -> None:
    store = MediaStore(tmp_path, lifetime_s=3600)
    att = await store.save(
        "s",
        kind="image",
        name="big.png",
        mime="image/png",
        chunks=chunks(b"x" * 100),
        max_bytes=50,
    )
    assert att.path is None and att.note == TOO_LARGE and att.size > 50
    assert all_files(tmp_path) == []


async def test_a_failing_stream_leaves_no_partial_file(tmp_path: Path) -> None:
    store = MediaStore(tmp_path, lifetime_s=3600)

    async def broken() -> AsyncIterator[bytes]:
        yield b"abc"
        raise ConnectionError("gone")

    with pytest.raises(ConnectionError):
        await store.save("s", kind="file", name="a", mime="", chunks=broken(), max_bytes=50)
    assert all_files(tmp_path) == []


async def test_media_older_than_the_lifetime_is_removed(tmp_path: Path) -> None:
    store = MediaStore(tmp_path, lifetime_s=100)
    old = await store.save(
        "s1", kind="file", name="o.txt", mime="", chunks=chunks(b"old"), max_bytes=50
    )
    new = await store.save(
        "s2", kind="file", name="n.txt", mime="", chunks=chunks(b"new"), max_bytes=50
    )
    assert old.path and new.path
    now = os.stat(new.path).st_mtime
    os.utime(old.path, (now - 101, now - 101))
    assert await store.sweep(now=now) == 1
    assert all_files(tmp_path) == [Path(new.path)]
    assert not store.session_dir("s1").exists()


async def test_a_received_file_name_is_kept_as_valid_text(tmp_path: Path) -> None:
    store = MediaStore(tmp_path / "data", lifetime_s=3600)
    att = await store.save(
        "s",
        kind="file",
        name="re\x1b[2Jport\ud800\x00 caf\udce9\n.pdf",
        mime="application/pdf",
        chunks=chunks(b"%PDF"),
        max_bytes=100,
    )
    assert att.name == "re[2Jport\ufffd café .pdf"


async def test_partial_files_go_at_start_only(tmp_path: Path) -> None:
    """The periodic sweep leaves a download in progress alone; the sweep at start (no
    download runs then) removes every partial file, however new."""
    store = MediaStore(tmp_path, lifetime_s=100)
    kept = await store.save(
        "s1", kind="file", name="k.txt", mime="", chunks=chunks(b"kept"), max_bytes=50
    )
    partial = store.session_dir("s1") / ".incoming-abc123.tmp"
    partial.write_bytes(b"half a file")
    assert await store.sweep() == 0
    assert partial.exists()
    assert await store.sweep(leftovers=True) == 1
    assert not partial.exists()
    assert kept.path and all_files(tmp_path) == [Path(kept.path)]


@given(st.text(st.characters(exclude_categories=())))
def test_any_file_name_is_shown_as_one_line_of_valid_text(raw: str) -> None:
    shown = display_name(raw)
    shown.encode("utf-8")
    assert shown and "/" not in shown and len(shown) <= 120
    assert not any(unicodedata.category(ch) == "Cc" for ch in shown)  # no NUL, no line break
