"""Hybrid recall at 100,000 messages: indexing time, recall latency (p95) and RSS growth.

Writes 100,000 messages over 100 sessions of one person, then embeds them all through the
indexer (`Recall.catch_up`, batches of 512) against the scripted `/v1/embeddings` server on
loopback, which answers at once (its vectors: tests/support/fake_embeddings.py). Then times
recall queries: the whole search (the query embedded over HTTP, the keyword index, the
vector index, the fusion) and the vector index's part alone, and checks the packed scan's
answers against a full exact scan of the float32 rows (the same top 10 expected).

RSS is this process's resident memory (`/proc/self/status` VmRSS) before the index is
built and after the queries; the growth holds the vectors, the chunk offsets and the keyword
index's page cache in this process.

Targets: recall p95 <= 50 ms at 100,000 messages (2-core machine).

    python bench/bench_recall.py [--messages 100000] [--dim 64] [--queries 200]
"""

from __future__ import annotations

import argparse
import array
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fake_embeddings import EmbeddingsServer, concept_vector

from squidd.config.memory import RecallSettings
from squidd.core.models import Message
from squidd.fs import append_lines_locked
from squidd.gateway.recall import Recall
from squidd.llm.embeddings import EmbeddingsClient
from squidd.store.jsonl import JsonlStore
from squidd.store.recall_index import RecallScope
from squidd.store.records import MESSAGE

P95_TARGET_MS = 50.0
WORDS = [
    "boat",
    "train",
    "coffee",
    "tea",
    "budget",
    "invoice",
    "meeting",
    "garden",
    "kayak",
    "berlin",
    "paris",
    "lunch",
    "dinner",
    "report",
    "deadline",
    "holiday",
    "doctor",
    "dentist",
    "car",
    "automobile",
    "sister",
    "birthday",
    "peanut",
    "allergy",
    "password",
    "plumber",
    "roof",
    "window",
    "piano",
    "guitar",
    "football",
    "tennis",
    "school",
    "homework",
    "recipe",
]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fill(store: JsonlStore, messages: int, sessions: int) -> None:
    rng = random.Random(7)
    per = messages // sessions
    for s in range(sessions):
        lines = []
        for i in range(per):
            text = " ".join(rng.choice(WORDS) for _ in range(8)) + f" n{s}x{i}"
            role = "user" if i % 2 == 0 else "assistant"
            ts = "2026-08-01T10:00:00+00:00"
            lines.append(MESSAGE.dumps(Message(role=role, content=text, ts=ts, by="ann")))  # type: ignore[arg-type]
        session = f"mail:s{s}"
        append_lines_locked(store.history_path(session), lines)
        people = store.people_path(session)
        people.write_text(f'{{"session_id": "{session}", "people": ["ann"]}}')


def exact_top(f32: Path, dim: int, query: list[float], k: int) -> list[int]:
    rows = array.array("f")
    rows.frombytes(f32.read_bytes())
    norm = math.sqrt(sum(x * x for x in query)) or 1.0
    q = [x / norm for x in query]
    scores = [
        math.fsum(map(float.__mul__, q, rows[i * dim : (i + 1) * dim]))
        for i in range(len(rows) // dim)
    ]
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


async def measure(messages: int, dim: int, queries: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, EmbeddingsServer(dim=dim) as server:
        store = JsonlStore(Path(tmp))
        fill(store, messages, 100)
        client = EmbeddingsClient(server.base_url, server.model, None, timeout_s=60)
        recall = Recall(store, RecallSettings(batch=512), scope="person", embedder=client)
        assert recall.index is not None
        before = rss_mib()
        started = time.perf_counter()
        added = await recall.catch_up()
        index_s = time.perf_counter() - started
        scope = await recall.scope("ann")
        assert scope is not None and added == messages
        rng = random.Random(11)
        texts = [" ".join(rng.sample(WORDS, 3)) for _ in range(queries)]
        await recall.search(texts[0], scope, 20)  # the keyword index built once
        whole, vector = [], []
        for text in texts:
            t0 = time.perf_counter()
            await recall.search(text, scope, 20)
            whole.append((time.perf_counter() - t0) * 1000)
            qv = concept_vector(text, dim)
            t0 = time.perf_counter()
            recall.index.search(qv, RecallScope(scope.sessions, "ann"), 20)
            vector.append((time.perf_counter() - t0) * 1000)
        after = rss_mib()
        agree = 0
        checks = texts[:10]
        for text in checks:
            qv = concept_vector(text, dim)
            found = recall.index.search(qv, RecallScope(None, "ann"), 10)
            exact = exact_top(recall.index.root / "history.f32", dim, qv, 10)
            exact_scores = {round(s, 5) for s in _scores(recall, qv, exact, dim)}
            got_scores = {round(s, 5) for _, s in found}
            agree += exact_scores == got_scores
        await client.aclose()
        return {
            "index_s": index_s,
            "per_s": messages / index_s,
            "p95_ms": statistics.quantiles(whole, n=20)[-1],
            "median_ms": statistics.median(whole),
            "vector_p95_ms": statistics.quantiles(vector, n=20)[-1],
            "rss_growth_mib": after - before,
            "exact_agree": agree / len(checks),
        }


def _scores(recall: Recall, query: list[float], rows: list[int], dim: int) -> list[float]:
    from squidd.store.vectors import exact_scores, unit

    assert recall.index is not None
    return exact_scores(recall.index.root / "history.f32", dim, unit(query), rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    got = anyio.run(measure, args.messages, args.dim, args.queries)
    print(f"messages: {args.messages}  dim: {args.dim}")
    print(f"indexing: {got['index_s']:.1f} s ({got['per_s']:.0f} messages/s)")
    print(f"recall p95: {got['p95_ms']:.1f} ms (target <= {P95_TARGET_MS:.0f} ms)")
    print(f"recall median: {got['median_ms']:.1f} ms")
    print(f"vector search p95: {got['vector_p95_ms']:.1f} ms")
    print(f"rss growth: {got['rss_growth_mib']:.1f} MiB")
    print(f"top 10 as an exact scan: {got['exact_agree']:.0%} of queries")


if __name__ == "__main__":
    main()
