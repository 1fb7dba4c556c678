"""The recall index on disk: whole records back after a reopen (history rows and the
summaries' and MEMORY.md's docs), another model or a damaged state starting it afresh."""

from __future__ import annotations

from pathlib import Path

from squidd.fs import safe_name
from squidd.store.jsonl import JsonlStore
from squidd.store.recall_index import Chunk, RecallIndex, RecallScope, doc_key
from squidd.store.recall_sources import Cursor, Pending

MODEL = "m1"


def opened(root: Path, model: str = MODEL, before: RecallIndex | None = None) -> RecallIndex:
    """The index opened anew (`before`, the one open until now, lets go of it first)."""
    if before is not None:
        before.close()
    index = RecallIndex(JsonlStore(root))
    assert index.open(model)
    return index


def test_rows_and_docs_come_back_whole_after_a_reopen(tmp_path: Path) -> None:
    index = opened(tmp_path)
    said = Chunk(
        "history", "mail:ann", 7, "the boat is blue", "2026-08-01T10:00:00+00:00", "ann", "user"
    )
    other = Chunk("history", "mail:bob", 0, "a red kite", None, None, "assistant")
    index.commit(Pending([said, other], {"x.jsonl": Cursor(1, 10, 8)}), [[1.0, 0.0], [0.0, 1.0]])
    # A person's MEMORY.md is known by its folder's name (the person's safe name).
    entry = Chunk("memory", "", 0, "likes tea", person=safe_name("ann"), role="memory")
    index.replace_docs([entry], {doc_key(entry): [0.6, 0.8]})

    again = opened(tmp_path, before=index)
    assert again.rows == 2
    [(best, score)] = again.search([1.0, 0.1], RecallScope(), 1)
    assert best == said and 0.99 < score <= 1.0
    found = dict(again.search([0.6, 0.8], RecallScope(None, "ann"), 3))
    assert entry in found and said in found and other in found
    only_bob = again.search([1.0, 0.1], RecallScope(frozenset({"mail:bob"}), None), 5)
    assert [chunk for chunk, _ in only_bob] == [other]  # the closer row is out of scope
    assert again.docs_to_embed([entry]) is None  # nothing changed: nothing to embed


def test_another_model_or_a_damaged_state_starts_afresh(tmp_path: Path) -> None:
    index = opened(tmp_path)
    chunk = Chunk("history", "s", 0, "hello")
    index.commit(Pending([chunk], {}), [[1.0, 2.0, 3.0]])
    index = opened(tmp_path, "m2", before=index)
    assert index.rows == 0
    assert not (index.root / "history.f32").exists()
    index.commit(Pending([chunk], {}), [[1.0, 2.0, 3.0]])
    (index.root / "state.json").write_text("{not json")
    index = opened(tmp_path, "m2", before=index)
    assert index.rows == 0
    index.commit(Pending([chunk], {}), [[1.0, 2.0, 3.0]])
    (index.root / "history.jsonl").write_bytes(b"{damaged" * 40 + b"\n")  # longer: not short
    assert opened(tmp_path, "m2", before=index).rows == 0


def test_one_process_owns_the_index_at_a_time(tmp_path: Path) -> None:
    owner = opened(tmp_path)
    owner.commit(Pending([Chunk("history", "s", 0, "hi")], {}), [[1.0, 0.0]])
    other = RecallIndex(JsonlStore(tmp_path))
    assert not other.open(MODEL)  # the owner's uncommitted rows are never cut by another
    owner.close()
    assert other.open(MODEL)
    assert other.rows == 1
