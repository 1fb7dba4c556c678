"""Hybrid recall against a scripted `/v1/embeddings` server on loopback: a fact said long
ago in another conversation is found with other words where the keyword index misses it;
nothing of another agent's or another person's is ever returned; the automatic step stays
within its budget and leaves the prompt prefix byte-identical between turns."""

from __future__ import annotations

import functools
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from structlog.testing import capture_logs

from squidd.config import Settings
from squidd.core.backoff import Backoff
from squidd.core.models import Message, SessionId
from squidd.core.supervisor import ChildHealth
from squidd.gateway.people import Speaker
from squidd.gateway.recall import Recall
from squidd.gateway.recall_ops import REINDEX, recall_ops, reindex
from squidd.gateway.runtime import Runtime, build_runtime
from squidd.gateway.status import StatusServer, socket_path
from squidd.gateway.turn_tools import TurnScope, TurnTools
from squidd.llm.embeddings import embeddings_client
from squidd.store.jsonl import JsonlStore
from tests.support.fake_embeddings import EmbeddingsServer
from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio

ALICE, BOB = "alice@example.org", "bob@example.org"
FACT = "By the way, I am allergic to peanuts, please remember that."
QUERY = "groundnut intolerance"  # no word of FACT


@pytest.fixture
def embeddings() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer() as server:
        yield server


def settings_for(
    tmp_path: Path, emb: EmbeddingsServer, chat_url: str = "http://127.0.0.1:9/v1", **recall: Any
) -> Settings:
    return Settings.model_validate(
        {
            "llm": {
                "providers": [
                    {"name": "chat", "base_url": chat_url, "models": [{"name": "fake-model"}]},
                    {"name": "emb", "base_url": emb.base_url},
                ],
                "chain": ["chat/fake-model"],
            },
            "storage": {"data_dir": str(tmp_path / "data")},
            "agents": {"memory_scope": "person", "list": [{"name": "main"}, {"name": "other"}]},
            "memory": {"recall": {"embeddings": f"emb/{emb.model}", "batch": 256, **recall}},
        }
    )


def said(text: str, by: str | None = None, role: str = "user") -> Message:
    return Message(role=role, content=text, ts="2026-08-01T10:00:00+00:00", by=by)  # type: ignore[arg-type]


async def recall_as(runtime: Runtime, person: str, session: str, query: str) -> str:
    """What the `recall` tool of `person`'s private turn in `session` answers."""
    scope = TurnScope(SessionId(session), "email", speaker=Speaker(person, person))
    tools = {t.name: t for t in TurnTools(runtime).for_turn(scope)}
    result = await tools["recall"].execute({"query": query})
    return result.content


async def plant(runtime: Runtime) -> None:
    store = runtime.store
    await store.append_messages(SessionId("mail:alice-old"), [said(FACT, ALICE)])
    filler = [
        said(
            f"note {i}: the weather in town {i % 40} was fine",
            ALICE,
            "user" if i % 2 else "assistant",
        )
        for i in range(2000)
    ]
    await store.append_messages(SessionId("mail:alice-old"), filler[:1000])
    await store.append_messages(SessionId("mail:alice-chat"), filler[1000:])
    await store.append_messages(
        SessionId("mail:bob"), [said("CANARY-BOB my peanut allergy is severe", BOB)]
    )
    await store.save_global_memory("- CANARY-BOBMEM peanut allergy of bob", person=BOB)
    await store.save_global_memory("- CANARY-SHARED peanut allergy in the shared memory")
    await store.save_global_memory("- Alice keeps a red automobile in the garage", person=ALICE)
    other = runtime.agents["other"].store
    await other.append_messages(
        SessionId("mail:alice-other"), [said("CANARY-AGENT I am allergic to peanuts", ALICE)]
    )


async def test_a_fact_from_2000_messages_ago_is_recalled_by_meaning(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    runtime = build_runtime(settings_for(tmp_path, embeddings))
    try:
        await plant(runtime)
        for agent in runtime.agents.values():
            assert agent.recall is not None
            await agent.recall.catch_up()
        assert runtime.recall is not None and runtime.recall.index is not None
        assert runtime.recall.index.rows == 2002  # alice's 2,001 and bob's one
        # The keyword index alone misses it: none of the query's words was said.
        words = await runtime.store.search_all_sessions(QUERY, limit=20, person=ALICE)
        assert words == []
        answer = await recall_as(runtime, ALICE, "mail:alice-new", QUERY)
        first = answer.splitlines()[0]
        assert "allergic to peanuts" in first
        assert "mail:alice-old" in first and "2026-08-01" in first
        # Her own MEMORY.md by meaning too ("car" was never written).
        assert "red automobile" in await recall_as(runtime, ALICE, "mail:alice-new", "car")
        # Canaries: another person's conversation and memory, the shared memory in a
        # private turn, another agent's history: never, however close in meaning.
        for query in (QUERY, "peanut allergy", "allergic to peanuts", "CANARY"):
            answer = await recall_as(runtime, ALICE, "mail:alice-new", query)
            assert "CANARY" not in answer, (query, answer)
        # The canaries are there to be found by their own people (the test can fail).
        assert "CANARY-BOB " in await recall_as(runtime, BOB, "mail:bob-new", "peanut allergy")
        assert "CANARY-BOBMEM" in await recall_as(runtime, BOB, "mail:bob-new", "peanut allergy")
        other = await recall_as(runtime.agents["other"], ALICE, "mail:x", QUERY)
        assert "CANARY-AGENT" in other
    finally:
        await runtime.aclose()


async def test_the_indexer_embeds_only_what_is_new_and_retries_a_failed_batch(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    runtime = build_runtime(settings_for(tmp_path, embeddings))
    try:
        recall = runtime.recall
        assert recall is not None and recall.index is not None
        session = SessionId("mail:alice")
        await runtime.store.append_messages(session, [said(f"line {i}", ALICE) for i in range(300)])
        embeddings.fail_next = [503]
        with pytest.raises(Exception, match="503"):
            await recall.catch_up()
        assert recall.index.rows == 0
        assert await recall.catch_up() == 300
        assert await recall.catch_up() == 0  # nothing new: nothing embedded again
        await runtime.store.append_messages(session, [said("one more line", ALICE)])
        assert await recall.catch_up() == 1
        history = [t for t in embeddings.inputs if t.startswith(("line", "one more"))]
        assert sorted(history) == sorted({*history})  # each message embedded once
        assert len(history) == 301
    finally:
        await runtime.aclose()


async def test_a_new_embeddings_model_reindexes_everything(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    runtime = build_runtime(settings_for(tmp_path, embeddings))
    try:
        assert runtime.recall is not None
        await runtime.store.append_messages(SessionId("s"), [said("hello there", ALICE)])
        assert await runtime.recall.catch_up() == 1
    finally:
        await runtime.aclose()
    embeddings.model = "scripted-embed-2"
    changed = build_runtime(settings_for(tmp_path, embeddings))
    try:
        assert changed.recall is not None and changed.recall.index is not None
        assert await changed.recall.catch_up() == 1
        assert changed.recall.index.model == "scripted-embed-2"
        assert changed.recall.index.rows == 1
    finally:
        await changed.aclose()


async def test_the_automatic_step_keeps_its_budget_and_the_prompt_prefix(
    tmp_path: Path, embeddings: EmbeddingsServer, fake_llm: FakeLLM
) -> None:
    settings = settings_for(
        tmp_path, embeddings, fake_llm.base_url, auto=True, auto_tokens=60, auto_snippets=3
    )
    runtime = build_runtime(settings)
    try:
        assert runtime.recall is not None
        await plant(runtime)
        await runtime.recall.catch_up()
        session = SessionId("mail:alice-new")
        for text in ("Any groundnut intolerance I told you about?", "And my car?"):
            await runtime.agent.run(session, text, "email", person=ALICE, memory_of=ALICE)
        first, second = (r["messages"] for r in fake_llm.chat_requests)
        # The prefix (system prompt and the history before the new message) is identical.
        assert second[: len(first) - 1] == first[:-1]
        assert second[len(first) - 1]["content"] == "Any groundnut intolerance I told you about?"
        note, _, asked = first[-1]["content"].rpartition("\n\n")
        assert asked == "Any groundnut intolerance I told you about?"
        assert "allergic to peanuts" in note
        assert len(note) <= 4 * 60  # within auto_tokens (four characters a token)
        assert "CANARY" not in note
    finally:
        await runtime.aclose()


def test_an_embeddings_model_of_no_provider_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="names no provider"):
        Settings.model_validate(
            {
                "storage": {"data_dir": str(tmp_path)},
                "memory": {"recall": {"embeddings": "nowhere/model"}},
            }
        )


async def test_a_search_and_the_indexer_at_start_open_the_index_once(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    """At start the indexer and a turn's first search both find the index unopened: one
    opens it, the other waits (two loads at once would build one row→session table out of
    both, and the mask that keeps another person's rows out of a search from it)."""
    config = settings_for(tmp_path, embeddings)
    first = build_runtime(config)
    try:
        await plant(first)
        assert first.recall is not None
        await first.recall.catch_up()
    finally:
        await first.aclose()
    runtime = build_runtime(config)
    try:
        recall, index = runtime.recall, runtime.recall.index if runtime.recall else None
        assert recall is not None and index is not None
        real_open, release, opens = index.open, threading.Event(), []

        def open_held(model: str) -> bool:
            opens.append(model)
            if len(opens) == 1:
                release.wait()  # the first load is held until the other task is parked
            return real_open(model)

        index.open = open_held  # type: ignore[method-assign]
        found: list[str] = []

        async def search() -> None:
            found.extend(await recall.recall(QUERY, ALICE, 2000))

        async with anyio.create_task_group() as tg:
            tg.start_soon(search)
            tg.start_soon(recall.catch_up)
            await wait_all_tasks_blocked()
            release.set()
        assert len(opens) == 1, opens
        assert len(index._row_session) == index.rows  # the mask's row→session table
        assert found and "allergic to peanuts" in found[0]
        assert not any("CANARY" in line for line in found), found
    finally:
        await runtime.aclose()


async def test_a_torn_last_line_does_not_keep_the_indexer_busy(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    """A crash mid-append leaves a torn last line until the session's next message (maybe
    never): the indexer takes the whole lines before it and is done, rather than passing
    over the same cursor again and again without end."""
    runtime = build_runtime(settings_for(tmp_path, embeddings))
    try:
        recall = runtime.recall
        assert recall is not None and recall.index is not None
        session = SessionId("mail:alice")
        await runtime.store.append_messages(session, [said("whole line", ALICE)])
        assert await recall.catch_up() == 1
        [path] = [p for p, s in runtime.store.session_files().items() if s == session]
        with path.open("ab") as handle:
            handle.write(b'{"role": "user", "content": "torn mid-wri')
        pending = recall.index.pending(10)
        assert pending.chunks == [] and pending.cursors == {}  # nothing new: nothing to do
        assert await recall.catch_up() == 0
        await runtime.store.append_messages(session, [said("after the crash", ALICE)])
        assert await recall.catch_up() == 1
        assert recall.index.rows == 2
    finally:
        await runtime.aclose()


async def test_a_reindex_asked_during_a_long_catch_up_is_answered_between_batches(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    """`squidd memory reindex` while the indexer embeds a long history (a new model, a
    first start): the daemon empties the index after the batch in flight, not after the
    whole catch-up (the command waits for its answer only so long), and the catch-up goes
    on from the start."""
    runtime = build_runtime(settings_for(tmp_path, embeddings, batch=10))
    try:
        recall = runtime.recall
        assert recall is not None and recall.index is not None
        said_here = [said(f"line {i}", ALICE) for i in range(30)]
        await runtime.store.append_messages(SessionId("mail:alice"), said_here)
        order: list[str] = []
        embeddings.pause_at = 2  # the second batch waits: the first is in the index

        async def catch_up() -> None:
            await recall.catch_up()
            order.append("caught up")

        async def reindex() -> None:
            answer = await recall_ops(runtime.recalls)[REINDEX]({"agent": "main"})
            assert answer == {"agents": ["main"], "by": "daemon"}, answer
            order.append("reindexed")

        async with anyio.create_task_group() as tg:
            tg.start_soon(catch_up)
            await anyio.to_thread.run_sync(embeddings.paused.wait)
            tg.start_soon(reindex)
            await wait_all_tasks_blocked()
            embeddings.pause_at = None
            embeddings.release.set()
        assert order == ["reindexed", "caught up"]
        assert recall.index.rows == 30  # every line once, after the reset
        assert await recall.catch_up() == 0
    finally:
        await runtime.aclose()


async def test_a_daemon_slow_to_answer_a_reindex_is_not_raced_by_the_command(
    embeddings: EmbeddingsServer,
) -> None:
    """`squidd memory reindex` whose daemon does not answer in time: the command says so,
    and never rebuilds the index itself beside the daemon that has it open (only with no
    daemon listening does the command rebuild)."""
    with tempfile.TemporaryDirectory(prefix="sq-", dir="/tmp") as tmp:  # a short socket path
        config = settings_for(Path(tmp), embeddings)
        store = JsonlStore(config.storage.data_dir)
        await store.append_messages(SessionId("mail:alice"), [said("a fact", ALICE)])
        answered = anyio.Event()

        async def busy(request: Mapping[str, Any]) -> dict[str, Any]:
            await answered.wait()
            return {"agents": ["main"], "by": "daemon"}

        async def snapshot() -> dict[str, Any]:
            return {}

        server = StatusServer(socket_path(config), snapshot, {REINDEX: busy})
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            answer = await anyio.to_thread.run_sync(
                functools.partial(reindex, config, None, timeout_s=0.5)
            )
            answered.set()
            tg.cancel_scope.cancel()
        assert "did not answer" in answer.get("error", ""), answer
        assert not (config.storage.data_dir / "index" / "recall").exists()


async def test_the_indexer_loop_waits_out_provider_failures_and_goes_on(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    settings = settings_for(tmp_path, embeddings, every_s=0.01)
    store = JsonlStore(tmp_path / "loop")
    recall = Recall(
        store,
        settings.memory.recall,
        scope="person",
        embedder=embeddings_client(settings),
        backoff=Backoff(initial_s=0.01, maximum_s=0.02),
    )
    assert recall.index is not None
    await store.append_messages(SessionId("s"), [said(f"line {i}", ALICE) for i in range(10)])
    embeddings.fail_next = [503, 500]
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            await tg.start(recall.run, ChildHealth("recall"))
            with anyio.fail_after(30):  # a bound for a broken run, not a speed check
                while recall.index.rows < 10:
                    await recall.next_pass()
            tg.cancel_scope.cancel()
    await recall.aclose()
    retries = [e for e in logs if e["event"] == "recall_index_retry"]
    assert len(retries) == 2 and all("503" in e["reason"] or "500" in e["reason"] for e in retries)
    assert recall.index.rows == 10


async def test_recall_answers_from_the_keyword_index_when_the_query_cannot_be_embedded(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    runtime = build_runtime(settings_for(tmp_path, embeddings))
    try:
        assert runtime.recall is not None
        await plant(runtime)
        await runtime.recall.catch_up()
        embeddings.fail_next = [503]
        answer = await recall_as(runtime, ALICE, "mail:alice-new", "allergic peanuts")
        assert "allergic to peanuts" in answer
    finally:
        await runtime.aclose()


async def test_a_text_the_model_refuses_is_left_out_and_the_rest_indexed(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    runtime = build_runtime(settings_for(tmp_path, embeddings))
    try:
        recall = runtime.recall
        assert recall is not None and recall.index is not None
        texts = [f"line {i}" for i in range(5)]
        texts[2] = "a POISON line"
        await runtime.store.append_messages(SessionId("s"), [said(t, ALICE) for t in texts])
        embeddings.refuse_word = "POISON"
        with capture_logs() as logs:
            assert await recall.catch_up() == 4
        assert [e["index"] for e in logs if e["event"] == "recall_text_refused"] == [2]
        await runtime.store.append_messages(SessionId("s"), [said("line 5", ALICE)])
        assert await recall.catch_up() == 1  # the cursor went past the refused one
        assert recall.index.rows == 5
    finally:
        await runtime.aclose()


async def test_the_daemon_answers_a_reindex_by_emptying_the_index_for_its_indexer(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    runtime = build_runtime(settings_for(tmp_path, embeddings))
    try:
        recall = runtime.recall
        assert recall is not None and recall.index is not None
        await runtime.store.append_messages(SessionId("s"), [said("hello there", ALICE)])
        assert await recall.catch_up() == 1
        ops = recall_ops(runtime.recalls)
        assert await ops[REINDEX]({"agent": "nobody"}) == {"error": "no agent named 'nobody'"}
        assert await ops[REINDEX]({"agent": "main"}) == {"agents": ["main"], "by": "daemon"}
        assert recall.index.rows == 0
        assert await recall.catch_up() == 1  # the indexer's next pass embeds it again
    finally:
        await runtime.aclose()


async def test_a_rewritten_memory_embeds_only_its_new_entries_dated_by_the_file(
    tmp_path: Path, embeddings: EmbeddingsServer
) -> None:
    runtime = build_runtime(settings_for(tmp_path, embeddings))
    try:
        recall = runtime.recall
        assert recall is not None
        await runtime.store.save_global_memory("- likes tea\n- has a sister", person=ALICE)
        await recall.catch_up()
        before = len(embeddings.inputs)
        memory = "- likes tea\n- has a sister\n- drives an automobile"
        await runtime.store.save_global_memory(memory, person=ALICE)
        await recall.catch_up()
        assert embeddings.inputs[before:] == ["drives an automobile"]
        answer = await recall_as(runtime, ALICE, "mail:x", "car")
        assert answer.startswith("[20") and "drives an automobile" in answer  # dated
    finally:
        await runtime.aclose()


def test_an_embeddings_model_without_its_provider_says_what_to_write(tmp_path: Path) -> None:
    """`embeddings = "nomic-embed-text"` with the one `[llm]` endpoint: the error names the
    value to write (`default/...`), not a "chain entry" the user never wrote."""
    with pytest.raises(ValueError, match="'default/nomic-embed-text'") as raised:
        Settings.model_validate(
            {
                "storage": {"data_dir": str(tmp_path)},
                "memory": {"recall": {"embeddings": "nomic-embed-text"}},
            }
        )
    assert "chain entry" not in str(raised.value)
    with pytest.raises(ValueError, match=r"known: default; e\.g\. 'default/nomic-embed-text'"):
        Settings.model_validate(
            {
                "storage": {"data_dir": str(tmp_path)},
                "memory": {"recall": {"embeddings": "local/nomic-embed-text"}},
            }
        )
