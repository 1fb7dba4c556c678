"""The vector half of recall: one index per agent beside its keyword index, derived data.

Under `<agent data dir>/index/recall/` (0700, files 0600):

    history.f32     float32 rows of unit length, one per indexed message, appended
    history.q8      the same rows quantised (store/vectors.py), appended with them
    history.jsonl   one `Chunk` per row, same order: session, message number, date, person
    docs.jsonl      the summaries' paragraphs and the MEMORY.md entries, each with its
                    vector, rewritten whole (atomically) when one of them changed
    state.json      the embeddings model and dimension, the rows committed and the
                    chunk file's committed length, and each history file's cursor

A batch is appended to the three history files (fsync) and only then does `state.json`
(atomic) move the row count and the cursors. A crash between the two leaves rows past the
committed count: they are cut off when the index is opened, and the cursors, not moved,
give the same messages to the next batch. So nothing is stored twice and nothing skipped
(tests/faults/test_recall_kill.py). A file shorter than the state says, or a state of
another model, starts the index afresh: it is rebuilt from the JSONL, the summaries and
MEMORY.md (`squidd memory reindex` does the same on demand). Backups leave it out.

One index serves the agent's every person: a search carries its scope (the sessions the
speaker spoke in, whose MEMORY.md) and rows outside it are masked before ranking, so no row
of another person's conversation is ever a candidate. All calls block; the owner runs them
in a worker thread, one at a time (`RecallIndex.lock`).
"""

from __future__ import annotations

import array
import base64
import fcntl
import hashlib
import heapq
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog
from pydantic import TypeAdapter

from squidd.fs import atomic_write_text, make_private_dir, open_private, safe_name, write_all
from squidd.store.jsonl import JsonlStore
from squidd.store.recall_sources import (
    CHUNK,
    Chunk,
    Cursor,
    Pending,
    pending_messages,
    wanted_docs,
)
from squidd.store.vectors import PackedVectors, exact_scores, quantise, unit

__all__ = ["Chunk", "Pending", "RecallIndex", "RecallScope", "doc_key"]

log = structlog.get_logger()

_STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class RecallScope:
    """What one search may see: `sessions` (None: all) and the MEMORY.md of `memory_of`
    (None: the shared one)."""

    sessions: frozenset[str] | None = None
    memory_of: str | None = None
    files: dict[Path, str] = field(default_factory=dict, compare=False)
    """The history files in scope (path → session id), for the keyword index."""

    def admits(self, chunk: Chunk) -> bool:
        if chunk.source == "memory":  # a person's MEMORY.md is known by its folder's name
            return chunk.person == (None if self.memory_of is None else safe_name(self.memory_of))
        return self.sessions is None or chunk.session in self.sessions


@dataclass(frozen=True)
class _State:
    model: str = ""
    dim: int = 0
    rows: int = 0
    chunk_bytes: int = 0
    files: dict[str, Cursor] = field(default_factory=dict)


_STATE: TypeAdapter[_State] = TypeAdapter(_State)


def doc_key(chunk: Chunk) -> str:
    """What makes a doc's vector: its text where it is (not its number or date), so an
    entry that stayed when its file was rewritten is not embedded again."""
    where = [chunk.source, chunk.session, chunk.person, chunk.text]
    return hashlib.sha256(json.dumps(where).encode()).hexdigest()


class RecallIndex:
    """The agent's vector index (see the module)."""

    def __init__(self, store: JsonlStore) -> None:
        self._store = store
        self.root = store.data_dir / "index" / "recall"
        self.lock = threading.Lock()
        self._state = _State()
        self._packed: PackedVectors | None = None
        self._offsets = array.array("Q")  # each row's line start in history.jsonl
        self._row_session = array.array("I")  # each row's session, by number
        self._session_number: dict[str, int] = {}
        self._docs: list[tuple[Chunk, list[float]]] = []
        self._owner: int | None = None  # the open lock file while this process owns it

    # --- files ------------------------------------------------------------------------------
    def _path(self, name: str) -> Path:
        return self.root / name

    def _save_state(self) -> None:
        data = {"version": _STATE_VERSION, **_STATE.dump_python(self._state, mode="json")}
        atomic_write_text(self._path("state.json"), json.dumps(data))

    def _read_state(self) -> _State | None:
        try:
            raw = self._path("state.json").read_bytes()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
            if data.pop("version", None) != _STATE_VERSION:
                return None
            return _STATE.validate_python(data)
        except ValueError:
            log.warning("recall_state_unreadable", effect="index rebuilt")
            return None

    def own(self) -> bool:
        """Take the index for this process: one process at a time reads and writes it (the
        daemon's indexer, or the command line when no daemon runs), since opening it cuts
        rows a batch has not committed yet. False while another process holds it."""
        if self._owner is not None:
            return True
        make_private_dir(self.root)
        fd = open_private(self._path("owner.lock"), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._owner = fd
        return True

    def close(self) -> None:
        """Let another process own the index."""
        if self._owner is not None:
            os.close(self._owner)
            self._owner = None

    def open(self, model: str) -> bool:
        """Own and load the index for `model` (False: another process owns it); anything
        inconsistent, or of another model, is dropped and rebuilt from the sources."""
        if not self.own():
            log.info("recall_index_busy", effect="another process owns it: keyword recall here")
            return False
        state = self._read_state()
        if state is None or state.model != model or not self._loaded_whole(state):
            if state is not None and state.model != model:
                log.info("recall_model_changed", old=state.model, new=model, effect="reindex")
            self.reset(model)
        return True

    def reset(self, model: str) -> None:
        """Empty the index (files included) for `model`."""
        make_private_dir(self.root)
        for name in ("history.f32", "history.q8", "history.jsonl", "docs.jsonl"):
            self._path(name).unlink(missing_ok=True)
        self._state = _State(model=model)
        self._packed, self._offsets, self._docs = None, array.array("Q"), []
        self._row_session, self._session_number = array.array("I"), {}
        self._save_state()

    def _loaded_whole(self, state: _State) -> bool:
        try:
            return self._load(state)
        except (ValueError, KeyError, TypeError) as exc:  # a damaged line or docs file
            log.warning("recall_index_damaged", reason=type(exc).__name__, effect="rebuilt")
            return False

    def _load(self, state: _State) -> bool:
        dim, rows = state.dim, state.rows
        f32, q8, chunks = (self._path(n) for n in ("history.f32", "history.q8", "history.jsonl"))
        sizes = [p.stat().st_size if p.exists() else 0 for p in (f32, q8, chunks)]
        if sizes[0] < 4 * dim * rows or sizes[1] < dim * rows or sizes[2] < state.chunk_bytes:
            log.warning("recall_index_short", effect="index rebuilt")
            return False
        # Rows past the committed count were written by a batch cut short: not committed.
        for path, keep in ((f32, 4 * dim * rows), (q8, dim * rows), (chunks, state.chunk_bytes)):
            if path.exists() and path.stat().st_size > keep:
                os.truncate(path, keep)
        offsets = array.array("Q")
        self._row_session, self._session_number = array.array("I"), {}
        if chunks.exists():  # none before the first batch
            with chunks.open("rb") as handle:
                start = 0
                for line in handle:
                    offsets.append(start)
                    self._add_row_session(str(json.loads(line)["session"]))
                    start += len(line)
        if len(offsets) != rows:
            return False
        self._state, self._offsets = state, offsets
        if dim:
            self._packed = PackedVectors(dim)
            self._packed.extend(q8.read_bytes())
        self._docs = list(self._read_docs())
        return True

    def _read_docs(self) -> Iterator[tuple[Chunk, list[float]]]:
        try:
            raw = self._path("docs.jsonl").read_bytes()
        except FileNotFoundError:
            return
        for line in raw.splitlines():
            data = json.loads(line)
            vector = _floats(base64.b64decode(data.pop("vector")))
            yield CHUNK.validate_python(data), vector

    # --- what is not indexed yet ------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._state.model

    @property
    def rows(self) -> int:
        return self._state.rows

    def pending(self, limit: int) -> Pending:
        """Up to `limit` messages past the cursors (store/recall_sources.py)."""
        return pending_messages(self._store, self._state.files, limit)

    def commit(self, pending: Pending, vectors: Sequence[Sequence[float]]) -> None:
        """Append `pending`'s chunks with their vectors, then move the cursors (see the
        module for the order and why)."""
        if len(vectors) != len(pending.chunks):
            raise ValueError("one vector per chunk")
        units = [unit(v) for v in vectors]
        if units:
            self._check_dim(len(units[0]))
        lines = b"".join(CHUNK.dump_json(c) + b"\n" for c in pending.chunks)
        floats = b"".join(_f32(u) for u in units)
        quantised = b"".join(quantise(u) for u in units)
        for name, data in (("history.f32", floats), ("history.q8", quantised)):
            _append(self._path(name), data)
        _append(self._path("history.jsonl"), lines)
        start = self._state.chunk_bytes
        for chunk in pending.chunks:
            self._offsets.append(start)
            self._add_row_session(chunk.session)
            start += len(CHUNK.dump_json(chunk)) + 1
        if self._packed is not None:
            self._packed.extend(quantised)
        self._state = replace(
            self._state,
            rows=self._state.rows + len(units),
            chunk_bytes=start,
            files={**self._state.files, **pending.cursors},
        )
        self._save_state()

    def _add_row_session(self, session: str) -> None:
        number = self._session_number.setdefault(session, len(self._session_number))
        self._row_session.append(number)

    def _allowed(self, sessions: frozenset[str]) -> bytes:
        """One byte per row: 1 when its session is in `sessions` (a C loop over rows)."""
        by_number = sorted(self._session_number.items(), key=lambda item: item[1])
        flags = bytes(1 if name in sessions else 0 for name, _ in by_number)
        if len(flags) <= 256:
            return self._row_session.tobytes()[:: self._row_session.itemsize].translate(
                flags.ljust(256, b"\0")
            )
        return bytes(map(flags.__getitem__, self._row_session))

    def _check_dim(self, dim: int) -> None:
        if self._state.dim == 0:
            self._state = replace(self._state, dim=dim)
            self._packed = PackedVectors(dim)
        elif dim != self._state.dim:
            raise ValueError(f"embeddings changed length ({self._state.dim} → {dim})")

    # --- summaries and MEMORY.md ------------------------------------------------------------
    def wanted_docs(self) -> list[Chunk]:
        return wanted_docs(self._store)

    def docs_to_embed(self, wanted: list[Chunk]) -> list[Chunk] | None:
        """The wanted docs without a vector yet; None when the docs are as they were."""
        have = {doc_key(c) for c, _ in self._docs}
        if {doc_key(c) for c in wanted} == have:
            return None
        return [c for c in wanted if doc_key(c) not in have]

    def replace_docs(self, wanted: list[Chunk], fresh: dict[str, list[float]]) -> None:
        """The docs become `wanted`; vectors from `fresh` (by doc key) or kept ones."""
        known = {doc_key(c): v for c, v in self._docs} | {k: unit(v) for k, v in fresh.items()}
        docs = [(c, known[doc_key(c)]) for c in wanted if doc_key(c) in known]
        if docs:
            self._check_dim(len(docs[0][1]))
        lines = []
        for chunk, vector in docs:
            data: dict[str, Any] = CHUNK.dump_python(chunk, mode="json")
            data["vector"] = base64.b64encode(_f32(vector)).decode()
            lines.append(json.dumps(data, ensure_ascii=False))
        atomic_write_text(self._path("docs.jsonl"), "".join(f"{line}\n" for line in lines))
        self._docs = docs

    # --- search -----------------------------------------------------------------------------
    def search(
        self, query: Sequence[float], scope: RecallScope, k: int
    ) -> list[tuple[Chunk, float]]:
        """The `k` chunks in `scope` nearest to `query` (cosine), best first."""
        q = unit(query)
        if self._state.dim and len(q) != self._state.dim:
            return []
        found: list[tuple[Chunk, float]] = []
        for chunk, vector in self._docs:
            if scope.admits(chunk):
                found.append((chunk, sum(a * b for a, b in zip(q, vector, strict=True))))
        if self._packed is not None and self._state.rows:
            allowed = None
            if scope.sessions is not None and not scope.sessions >= self._session_number.keys():
                allowed = self._allowed(scope.sessions)
            rows = self._packed.candidates(q, max(8 * k, 200), allowed)
            scores = exact_scores(self._path("history.f32"), self._state.dim, q, rows)
            best = heapq.nlargest(k, zip(rows, scores, strict=True), key=lambda p: p[1])
            found += [(self._chunk(row), score) for row, score in best]
        found = [(chunk, score) for chunk, score in found if score > 0]  # unrelated: none
        found.sort(key=lambda pair: pair[1], reverse=True)
        return found[:k]

    def _chunk(self, row: int) -> Chunk:
        with self._path("history.jsonl").open("rb") as handle:
            handle.seek(self._offsets[row])
            return CHUNK.validate_json(handle.readline())


def _append(path: Path, data: bytes) -> None:
    fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _f32(vector: Sequence[float]) -> bytes:
    return array.array("f", vector).tobytes()


def _floats(raw: bytes) -> list[float]:
    values = array.array("f")
    values.frombytes(raw)
    return list(values)
