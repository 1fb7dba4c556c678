"""Hybrid recall for one agent: the background indexer and the searches of the `recall`
tool and the automatic step.

`Recall.run` is one more supervised child of the daemon (like the cron scheduler): it opens
the agent's vector index (store/recall_index.py; a changed embeddings model starts it
afresh), then, every `memory.recall.every_s`, embeds the messages past its cursors in
batches of `memory.recall.batch`, then the summaries' and MEMORY.md's changed entries. A
turn never waits for it: turns only read the index. A provider failure (unreachable, 429,
5xx, a malformed answer) waits the next delay of the one backoff schedule and tries the same
batch again; nothing is skipped, and the cursor moves only with the batch's rows.

A search (`search`) asks the keyword index (every word) and, with an embeddings model, the
vector index (nearest in meaning) within the speaker's scope, and fuses the two rankings
(core/recall.py). Scope: with memory shared, every conversation of the agent and the shared
MEMORY.md; with memory per person, only in a private turn, the conversations the speaker
spoke in and their own MEMORY.md (a group room's turn gets no recall: it would read one
person's memory to the others). Another agent's index is another directory: never searched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd.config.memory import RecallSettings
from squidd.core.backoff import Backoff, Failures
from squidd.core.recall import Embedder, Snippet, fuse, within_budget
from squidd.core.supervisor import ChildHealth
from squidd.errors import LLMCredentialsError, LLMError, LLMRejectedError, StorageError
from squidd.store.jsonl import JsonlStore
from squidd.store.recall_index import Chunk, Pending, RecallIndex, RecallScope, doc_key

__all__ = ["Recall"]

log = structlog.get_logger()
_T = TypeVar("_T")

_BACKOFF = Backoff(initial_s=2.0, maximum_s=300.0)
_NOTE_HEAD = "[Earlier, possibly relevant (recalled from other conversations):"


def _snippet(chunk: Chunk) -> Snippet:
    return Snippet(chunk.source, chunk.session, chunk.index, chunk.text, chunk.ts, chunk.role)


class Recall:
    """One agent's recall (see the module)."""

    def __init__(
        self,
        store: JsonlStore,
        settings: RecallSettings,
        *,
        scope: Literal["shared", "person"],
        embedder: Embedder | None = None,
        backoff: Backoff = _BACKOFF,
    ) -> None:
        self._store = store
        self._settings = settings
        self._scope = scope
        self._embedder = embedder
        self._backoff = backoff
        self.index = RecallIndex(store) if embedder is not None else None
        self._lock = anyio.Lock()  # one batch at a time (the loop, a test, a reindex)
        # One load at a time: the indexer and a turn's first search both find it unopened
        # at start, and two loads at once would build one row→session table out of both.
        self._open_lock = anyio.Lock()
        self._opened = False
        self._scopes: dict[str, tuple[int, RecallScope]] = {}  # by person ("" for all)
        self._passed = anyio.Event()  # set when the indexer finished a whole pass

    # --- indexing ---------------------------------------------------------------------------
    async def _open(self) -> bool:
        """Own and load the index, once (the indexer and a turn's first search both find it
        unopened at start); False while another process owns it."""
        if self._opened or self.index is None or self._embedder is None:
            return self._opened
        async with self._open_lock:
            if not self._opened:
                self._opened = await self._in_thread(self.index.open, self._embedder.model)
        return self._opened

    async def run(
        self, health: ChildHealth, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The indexer: catch up, wait, again; after a failure the backoff's next delay."""
        failures = Failures(self._backoff)
        task_status.started()
        while True:
            try:
                await self.catch_up()
            except LLMError as exc:
                delay = failures.next_delay()
                log.warning("recall_index_retry", reason=str(exc), retry_in_s=round(delay, 1))
                await anyio.sleep(delay)
                continue
            failures.up()
            self._passed.set()
            self._passed = anyio.Event()
            await anyio.sleep(self._settings.every_s)

    async def next_pass(self) -> None:
        """Until the running indexer has finished its next whole pass (caught up)."""
        await self._passed.wait()

    async def catch_up(self) -> int:
        """Embed everything not embedded yet; the number of history rows added. A provider
        failure leaves as `LLMError` with the cursors where the last whole batch left them."""
        if self.index is None or self._embedder is None:
            return 0
        if not await self._open():
            return 0
        added = 0
        while True:
            # The lock is taken batch by batch: a reset (`memory reindex`) waits for the
            # batch in flight only, and the next batch starts where the reset left it.
            async with self._lock:
                pending = await self._in_thread(self.index.pending, self._settings.batch)
                if not pending.chunks and not pending.cursors:
                    break
                pending, vectors = await self._embed(pending)
                await self._in_thread(self.index.commit, pending, vectors)
                added += len(pending.chunks)
        async with self._lock:
            await self._docs()
        if added:
            log.info("recall_indexed", rows=added, total=self.index.rows)
        return added

    async def _embed(self, pending: Pending) -> tuple[Pending, list[list[float]]]:
        """The batch's vectors. A batch refused (400: a text the model will not take) is
        embedded text by text and a text refused alone is left out, so one message never
        stops the index; when none is taken (a wrong model, a bad key) it is an error."""
        embedder = self._embedder
        assert embedder is not None  # noqa: S101 - the caller checked
        try:
            return pending, await embedder.embed([c.text for c in pending.chunks])
        except LLMCredentialsError:
            raise
        except LLMRejectedError:
            if len(pending.chunks) < 2:
                raise
        kept, vectors = [], []
        for chunk in pending.chunks:
            try:
                [vector] = await embedder.embed([chunk.text])
            except LLMCredentialsError:
                raise
            except LLMRejectedError as exc:
                log.warning(
                    "recall_text_refused", session=chunk.session, index=chunk.index, reason=str(exc)
                )
                continue
            kept.append(chunk)
            vectors.append(vector)
        if not kept:
            raise LLMRejectedError("the embeddings endpoint refused every text of a batch")
        return Pending(kept, pending.cursors), vectors

    async def _docs(self) -> None:
        index, embedder = self.index, self._embedder
        assert index is not None and embedder is not None  # noqa: S101 - the caller checked
        wanted = await self._in_thread(index.wanted_docs)
        missing = index.docs_to_embed(wanted)
        if missing is None:
            return
        fresh: dict[str, list[float]] = {}
        for start in range(0, len(missing), self._settings.batch):
            part = missing[start : start + self._settings.batch]
            vectors = await embedder.embed([c.text for c in part])
            fresh |= {doc_key(c): v for c, v in zip(part, vectors, strict=True)}
        await self._in_thread(index.replace_docs, wanted, fresh)

    async def reset(self) -> bool:
        """Drop the vectors (the indexer's next pass embeds everything again); False
        without an embeddings model."""
        if self.index is None or self._embedder is None:
            return False
        async with self._lock:
            if not await self._in_thread(self.index.own):
                return False
            await self._in_thread(self.index.reset, self._embedder.model)
            self._opened = True
        log.info("recall_index_reset", model=self._embedder.model)
        return True

    async def reindex(self) -> int:
        """Drop the vectors and embed everything again now (`squidd memory reindex`)."""
        if not await self.reset():
            return 0
        return await self.catch_up()

    async def _in_thread(self, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn(*args)` in a worker thread, holding the index's lock."""
        index = self.index
        assert index is not None  # noqa: S101 - only called with an index

        def locked() -> _T:
            with index.lock:
                return fn(*args)

        return await anyio.to_thread.run_sync(locked)

    async def aclose(self) -> None:
        if self.index is not None:
            await self._in_thread(self.index.close)
            self._opened = False
        closer = getattr(self._embedder, "aclose", None)
        if closer is not None:
            await closer()

    # --- searching --------------------------------------------------------------------------
    def available(self, memory_of: str | None) -> bool:
        """A turn of `memory_of`'s may recall (see the module)."""
        return self._scope == "shared" or memory_of is not None

    async def scope(self, memory_of: str | None) -> RecallScope | None:
        return await anyio.to_thread.run_sync(self.scope_for, memory_of)

    def scope_for(self, memory_of: str | None) -> RecallScope | None:
        """What a turn of `memory_of`'s may recall (see the module); None: nothing. The
        list of sessions is kept until the sessions folder changes (a new session, a new
        person in one), so a search does not read every people file."""
        if self._scope == "person" and memory_of is None:
            return None
        person = memory_of if self._scope == "person" else None
        version = self._store.sessions_version()
        cached = self._scopes.get(person or "")
        if cached is not None and cached[0] == version:
            return cached[1]
        if person is None:
            scope = RecallScope(None, None, self._store.session_files())
        else:
            files = self._store.sessions_of(person)
            scope = RecallScope(frozenset(files.values()), person, files)
        self._scopes[person or ""] = (version, scope)
        return scope

    async def search(self, query: str, scope: RecallScope, limit: int) -> list[Snippet]:
        """Keyword and vector hits within `scope`, fused, best first; both asked at once."""
        found: dict[str, list[Snippet]] = {}

        async def keyword() -> None:
            store = self._store
            hits = await anyio.to_thread.run_sync(store.search_files, scope.files, query, limit)
            found["keyword"] = [
                Snippet("history", h.session or "", h.index, h.snippet, h.ts, h.role) for h in hits
            ]

        async def vector() -> None:
            found["vector"] = await self._vector_search(query, scope, limit)

        async with anyio.create_task_group() as tg:
            tg.start_soon(keyword)
            tg.start_soon(vector)
        return fuse([found["vector"], found["keyword"]])

    async def _vector_search(self, query: str, scope: RecallScope, limit: int) -> list[Snippet]:
        if self.index is None or self._embedder is None:
            return []
        try:
            [vector] = await self._embedder.embed([query])
        except LLMError as exc:  # keyword recall still answers
            log.warning("recall_query_not_embedded", reason=str(exc))
            return []
        if not await self._open():
            return []
        started = time.perf_counter()
        found = await self._in_thread(self.index.search, vector, scope, limit)
        ms = round((time.perf_counter() - started) * 1000, 1)
        log.debug("recall_vector_search", hits=len(found), ms=ms)
        return [_snippet(chunk) for chunk, _score in found]

    async def recall(self, query: str, memory_of: str | None, tokens: int) -> list[str]:
        """The `recall` tool's lines: fused snippets within `tokens`."""
        scope = await self.scope(memory_of)
        if scope is None:
            return []
        return within_budget(await self.search(query, scope, 20), tokens)

    async def note(self, session: str, memory_of: str | None, text: str) -> str:
        """The automatic step's block for a turn (empty when off or nothing found): the
        best snippets from other conversations within `auto_tokens`. It goes after the
        stable prompt prefix, with the turn's own message, and is never stored."""
        settings = self._settings
        if not settings.auto or not self.available(memory_of) or not text.strip():
            return ""
        scope = await self.scope(memory_of)
        if scope is None:
            return ""
        try:
            found = await self.search(text, scope, 10)
        except StorageError as exc:  # the turn goes on without its note
            log.warning("recall_note_failed", reason=str(exc))
            return ""
        found = [s for s in found if s.session != session]
        head_cost = len(_NOTE_HEAD) // 4 + 2
        lines = within_budget(found, settings.auto_tokens - head_cost, settings.auto_snippets)
        return "\n".join([_NOTE_HEAD, *lines]) + "]" if lines else ""
