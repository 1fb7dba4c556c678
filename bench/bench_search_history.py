"""`search_history` over 100,000 stored messages: the index build and the search time.

History search answers from the SQLite FTS5 index beside the JSONL (store/history_index.py),
not from a scan. This writes 100,000 varied messages into one session (and, for the search
across sessions, spreads another 100,000 over 100 sessions), times the first search (which
builds the index from the JSONL) and then the median of many searches with the index up to
date, for a rare word, a common word and two words together.

Targets: index build for 100,000 messages under 10 s; search median under 50 ms.

    python bench/bench_search_history.py [--messages 100000] [--rounds 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from squidd.core.models import Message, SessionId
from squidd.fs import append_lines_locked
from squidd.store.jsonl import JsonlStore
from squidd.store.records import MESSAGE

BUILD_TARGET_S = 10.0
SEARCH_TARGET_MS = 50.0
WORDS = (
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
    "birthday",
    "present",
    "recipe",
    "bread",
    "cheese",
    "weather",
    "rain",
    "sun",
    "snow",
    "project",
    "release",
    "server",
    "backup",
    "password",
    "router",
    "printer",
    "school",
    "music",
)


def message(rng: random.Random, i: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(12))
    rare = f" zq{i}x" if i % 10_000 == 0 else ""
    return MESSAGE.dumps(
        Message(
            role="user" if i % 2 == 0 else "assistant",
            content=f"message {i}: {words}{rare}",
            ts=f"2026-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d}+00:00",
        )
    )


def fill(store: JsonlStore, session: SessionId, count: int, seed: int) -> None:
    rng = random.Random(seed)
    lines = [message(rng, i) for i in range(count)]
    append_lines_locked(store.history_path(session), lines, fsync=False)


async def timed(call: object) -> float:
    started = time.perf_counter()
    await call  # type: ignore[misc]
    return time.perf_counter() - started


async def main(messages: int, rounds: int) -> int:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        store = JsonlStore(Path(tmp))
        session = SessionId("bench-one")
        fill(store, session, messages, 1)
        build = await timed(store.search_history(session, "zq0x", limit=10))
        print(
            f"index build, {messages:,} messages in one session: {build:.2f} s "
            f"(target < {BUILD_TARGET_S:.0f} s)"
        )
        ok &= build < BUILD_TARGET_S
        for query in ("zq50000x", "kayak", "coffee budget"):
            times = [
                await timed(store.search_history(session, query, limit=10)) for _ in range(rounds)
            ]
            median = statistics.median(times) * 1000
            print(
                f"search_history {query!r}: median {median:.1f} ms "
                f"(target < {SEARCH_TARGET_MS:.0f} ms)"
            )
            ok &= median < SEARCH_TARGET_MS

        for n in range(100):
            fill(store, SessionId(f"bench-many-{n}"), messages // 100, n + 2)
        build = await timed(store.search_all_sessions("zq0x", limit=10))
        print(
            f"index build, {messages:,} more messages in 100 sessions: {build:.2f} s "
            f"(target < {BUILD_TARGET_S:.0f} s)"
        )
        ok &= build < BUILD_TARGET_S
        for query in ("zq0x", "kayak", "coffee budget"):
            times = [await timed(store.search_all_sessions(query, limit=10)) for _ in range(rounds)]
            median = statistics.median(times) * 1000
            print(
                f"search_all_history {query!r} over {2 * messages:,}: median {median:.1f} ms "
                f"(target < {SEARCH_TARGET_MS:.0f} ms)"
            )
            ok &= median < SEARCH_TARGET_MS
        # A small session in a big index: its rows are a small share of every match.
        small = SessionId("bench-many-0")
        for query in ("zq0x", "kayak", "coffee budget"):
            times = [
                await timed(store.search_history(small, query, limit=10)) for _ in range(rounds)
            ]
            median = statistics.median(times) * 1000
            print(
                f"search_history {query!r} in a {messages // 100:,}-message session of "
                f"{2 * messages:,} indexed: median {median:.1f} ms "
                f"(target < {SEARCH_TARGET_MS:.0f} ms)"
            )
            ok &= median < SEARCH_TARGET_MS
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    raise SystemExit(anyio.run(main, args.messages, args.rounds))
