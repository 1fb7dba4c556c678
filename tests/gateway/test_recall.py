"""Hybrid recall against a scripted `/v1/embeddings` server on loopback: a fact said long
ago in another conversation is found with other words where the keyword index misses it;
nothing of another agent's or another person's is ever returned; the automatic step stays
within its budget and leaves the prompt prefix byte-identical between turns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squidd.config import Settings
from squidd.core.models import Message, SessionId
from squidd.gateway.people import Speaker
from squidd.gateway.runtime import Runtime, build_runtime
from squidd.gateway.turn_tools import TurnScope, TurnTools
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
