"""The result-store contract (`core.ports.ResultStore`) over the file implementation: the
name it returns reads back the exact text under the data dir, names of different calls
never collide, and no session or call id leads out of the tool-results directory. No test
uses a double of this port, so the suite runs over the files only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from squidd.store.tool_results import PREFIX, ToolResultFiles

pytestmark = pytest.mark.anyio

TEXT = "Grüße \U0001f600\nline two\r\n" + "x" * 50_000


async def test_the_name_reads_back_the_exact_text(tmp_path: Path) -> None:
    name = await ToolResultFiles(tmp_path).save("m:!room:x", "call_1", TEXT)
    assert name.startswith(f"{PREFIX}/")
    path = tmp_path / name
    assert path.read_bytes().decode("utf-8") == TEXT
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_different_calls_get_different_names(tmp_path: Path) -> None:
    store = ToolResultFiles(tmp_path)
    pairs = [("s", "a.b"), ("s", "a_b"), ("s", "A_b"), ("t", "a.b"), ("S", "a.b")]
    names = [await store.save(session, call, f"{session}/{call}") for session, call in pairs]
    assert len(set(names)) == len(pairs)
    for (session, call), name in zip(pairs, names, strict=True):
        assert (tmp_path / name).read_text(encoding="utf-8") == f"{session}/{call}"


async def test_saving_the_same_call_again_replaces_it(tmp_path: Path) -> None:
    store = ToolResultFiles(tmp_path)
    first = await store.save("s", "c", "old")
    second = await store.save("s", "c", "new")
    assert first == second
    assert (tmp_path / second).read_text(encoding="utf-8") == "new"


async def test_no_id_leads_out_of_the_directory(tmp_path: Path) -> None:
    store = ToolResultFiles(tmp_path)
    for session, call in [("../../etc", "../passwd"), ("/abs", "a/b"), ("..", "..")]:
        name = await store.save(session, call, "t")
        assert (tmp_path / name).resolve().parent == (tmp_path / PREFIX).resolve()
    assert sorted(p.parent.name for p in tmp_path.rglob("*.txt")) == [PREFIX] * 3


async def test_sweep_removes_only_results_older_than_the_retention(tmp_path: Path) -> None:
    store = ToolResultFiles(tmp_path)
    old = tmp_path / await store.save("s", "old", "old text")
    new = tmp_path / await store.save("s", "new", "new text")
    now = new.stat().st_mtime
    os.utime(old, (now - 10 * 86400, now - 10 * 86400))
    assert await store.sweep(now, keep_s=5 * 86400) == 1
    assert not old.exists()
    assert new.read_text(encoding="utf-8") == "new text"
    assert await ToolResultFiles(tmp_path / "empty").sweep(now, keep_s=1) == 0
