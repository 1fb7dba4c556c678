"""How long it takes to build one turn's messages, for a short and a very long session.

A turn must cost the same whatever the age of the conversation: it reads the messages after
the consolidation cursor (and the memory documents), never the whole history file. This
prints the median time for sessions of 100 and 100,000 stored messages, both consolidated
up to their last 20 messages as a long-lived session would be, and the ratio of the two.

    python bench/bench_build_messages.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from squidd.core.memory import MemoryManager
from squidd.core.models import Message, SessionId
from squidd.fs import append_lines_locked
from squidd.store.jsonl import JsonlStore
from squidd.store.records import MESSAGE

RECENT = 20
THRESHOLD = 100


async def prepare(data: Path, total: int) -> tuple[MemoryManager, SessionId]:
    store = JsonlStore(data)
    session = SessionId(f"bench-{total}")
    lines = [
        MESSAGE.dumps(
            Message(
                role="user" if i % 2 == 0 else "assistant",
                content=f"message {i}: " + "lorem ipsum dolor sit amet " * 6,
                ts="2026-01-01T00:00:00+00:00",
            )
        )
        for i in range(total)
    ]
    append_lines_locked(store.history_path(session), lines, fsync=False)
    await store.save_consolidated_cursor(session, total - RECENT)
    await store.save_session_summary(session, "A long conversation about lorem ipsum. " * 20)
    await store.save_global_memory("The owner likes short answers.")
    # llm=None: consolidation never fires here; we time the read path of a turn.
    return MemoryManager(store, None, consolidation_threshold=THRESHOLD), session


async def time_one(manager: MemoryManager, session: SessionId) -> float:
    started = time.perf_counter()
    messages = await manager.build_messages(session, "base prompt", "new message")
    elapsed = time.perf_counter() - started
    assert len(messages) == RECENT + 2
    return elapsed


async def main(rounds: int) -> None:
    sizes = (100, 100_000)
    with tempfile.TemporaryDirectory() as tmp:
        setups = {n: await prepare(Path(tmp) / str(n), n) for n in sizes}
        samples: dict[int, list[float]] = {n: [] for n in sizes}
        for round_no in range(rounds + 10):
            # Interleaved, so drift in machine load hits both sizes alike; 10 warm-up rounds.
            for n in sizes:
                elapsed = await time_one(*setups[n])
                if round_no >= 10:
                    samples[n].append(elapsed)
        medians = {n: statistics.median(samples[n]) for n in sizes}
        for n in sizes:
            print(f"{n:>7} messages: {medians[n] * 1000:.3f} ms per turn (median of {rounds})")
        ratio = medians[100_000] / medians[100]
        print(f"ratio 100000/100: {ratio:.2f} (target <= 1.5)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    anyio.run(main, parser.parse_args().rounds)
