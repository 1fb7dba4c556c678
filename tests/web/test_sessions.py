"""The dashboard's session counts: right for 100,000 history lines, kept up incrementally
(a later look reads only what was appended), recounted for a replaced file, and a file
name that is not a session's (traversal) is no session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squidd.fs import safe_name
from squidd.web.sessions import SessionCounts

pytestmark = pytest.mark.anyio
LINE = json.dumps({"role": "user", "content": "x" * 40}) + "\n"


async def test_counts_are_right_and_only_the_appended_part_is_read(tmp_path: Path) -> None:
    stem = safe_name("matrix:!room:example.org")
    history = tmp_path / "sessions" / f"{stem}.jsonl"
    history.parent.mkdir()
    history.write_text(LINE * 100_000)
    counts = SessionCounts(tmp_path)
    [row] = await counts.all()
    assert (row.file, row.messages) == (stem, 100_000)
    # Overwrite the start in place (same inode, same size): an incremental count does not
    # read it again, so the count does not change; appended lines are counted.
    with history.open("r+b") as handle:
        handle.write(b"x" * len(LINE) * 10)
    with history.open("ab") as handle:
        handle.write(LINE.encode() * 3)
    one = await counts.one(stem)
    assert one is not None and one.messages == 100_003
    history.unlink()
    history.write_text(LINE * 2)  # replaced: another inode, counted from the start
    again = await counts.one(stem)
    assert again is not None and again.messages == 2


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "x-" + "0" * 19, "X-" + "0" * 20, ""])
async def test_a_name_that_is_not_a_session_file_is_none(tmp_path: Path, name: str) -> None:
    assert await SessionCounts(tmp_path).one(name) is None


async def test_a_session_names_the_people_who_spoke_in_it(tmp_path: Path) -> None:
    """Written by the real store: a turn's user message with its speaker; the row names the
    session by its id and its people, without any consolidation meta yet."""
    from squidd.core.models import Message, SessionId
    from squidd.store.jsonl import JsonlStore

    store = JsonlStore(tmp_path)
    session = SessionId("room#2")
    await store.append_messages(session, [Message(role="user", content="hi", by="alice")])
    await store.append_messages(session, [Message(role="user", content="yo", by="bob")])
    [row] = await SessionCounts(tmp_path).all()
    assert (row.session_id, row.people, row.with_whom) == ("room#2", ("alice", "bob"), "alice, bob")
