"""How much the daemon's memory grows with the number of turns it has answered.

A real `squidd run` process answers sequential turns from many sessions (one message to
each session per round, each session's turns in order) against the scripted model server on
127.0.0.1, through the loopback load channel. Its resident set (VmRSS from /proc) is read
after the first 2,000 turns (start-up, imports and caches are warm by then) and at the end;
the growth in between must stay within 5 MiB for 20,000 turns over 200 sessions: a year of
an active household is tens of thousands of turns, and nothing a turn leaves behind may be
kept for the life of the process.

    python bench/bench_memory.py            # 20,000 turns over 200 sessions (a few minutes)
    python bench/bench_memory.py --quick    # 4,000 turns over 40 sessions, for a smoke run
    python bench/bench_memory.py --trace 8  # also dump tracemalloc snapshots and print the
                                            # biggest growth by line (slower)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.daemon_load import LoadedDaemon, household_responder, reporting_usage

TARGET_KIB = 5 * 1024


def default_base_dir() -> str | None:
    shm = Path("/dev/shm")  # noqa: S108 - mkdtemp makes a private directory under it
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def top_growth(first: Path, last: Path, limit: int = 15) -> None:
    before = tracemalloc.Snapshot.load(str(first))
    after = tracemalloc.Snapshot.load(str(last))
    print(f"tracemalloc: biggest growth between the checkpoints (top {limit}, by traceback)")
    for stat in after.compare_to(before, "traceback")[:limit]:
        print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
        for line in stat.traceback.format()[-8:]:
            print(f"      {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=20_000, help="turns in all")
    parser.add_argument("--warmup", type=int, default=2_000, help="turns before the baseline")
    parser.add_argument("--quick", action="store_true", help="4,000 turns over 40 sessions")
    parser.add_argument("--trace", type=int, default=0, metavar="FRAMES")
    parser.add_argument(
        "--data-dir",
        default=default_base_dir(),
        help="where the daemon's data dir is made (default: /dev/shm when there is one: the "
        "fsyncs of a disk would only slow the run down; page cache is not in the RSS)",
    )
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.turns, args.warmup = 40, 4_000, 800
    sessions = [f"bench-{i:04d}" for i in range(args.sessions)]
    warm_rounds = max(1, args.warmup // args.sessions)
    all_rounds = max(warm_rounds + 1, args.turns // args.sessions)
    step = max(1, (all_rounds - warm_rounds) // 6)
    checkpoints = sorted({*range(warm_rounds, all_rounds, step), all_rounds})

    started = time.monotonic()
    # Every reply reports its usage, as a provider's does: the daemon records it per call.
    responder = reporting_usage(household_responder)
    with LoadedDaemon(
        trace_frames=args.trace, base_dir=args.data_dir, responder=responder
    ) as daemon:
        print(f"squidd run pid {daemon.pid}; start RSS {mib(daemon.rss_kib())}")
        figures: dict[int, int] = {}
        snapshots: list[Path] = []
        done = 0
        for mark in checkpoints:
            daemon.rounds(sessions, mark - done)
            done = mark
            figures[daemon.turns] = rss = daemon.rss_kib()
            rate = daemon.turns / (time.monotonic() - started)
            print(
                f"  after {daemon.turns:>6} turns: RSS {mib(rss)}"
                f"  prompt {daemon.llm.last_prompt_chars} chars  ({rate:.0f} turns/s)"
            )
            if args.trace and mark in (warm_rounds, all_rounds):
                snapshots.append(daemon.snapshot(daemon.root / f"snap-{mark}.bin"))
        if snapshots:
            top_growth(snapshots[0], snapshots[-1])

    turns = sorted(figures)
    first, last = turns[0], turns[-1]
    growth = figures[last] - figures[first]
    per_turn = growth * 1024 / max(1, last - first)
    print(
        f"{len(sessions)} sessions, {last} turns in {time.monotonic() - started:.0f} s: "
        f"RSS {mib(figures[first])} after {first} turns, {mib(figures[last])} after {last}"
    )
    ok = growth <= TARGET_KIB
    scope = "" if last - first >= 18_000 else " (set for 18,000 turns after the baseline)"
    print(
        f"growth {mib(growth)} ({per_turn:.0f} bytes per turn); "
        f"target <= {mib(TARGET_KIB)}{scope}: " + ("PASS" if ok else "FAIL")
    )
    if args.trace:
        print("(tracemalloc was on: its own bookkeeping is in the RSS figures)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
