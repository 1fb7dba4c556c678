"""P3's CPU per turn of two source trees side by side, their rounds alternated, so the load
of a shared machine falls on both alike (a before/after comparison of a change).

    python bench/p3_pair.py BEFORE_SRC AFTER_SRC [--sessions 50] [--pairs 8] [--rounds 2]

Each tree's `squidd run` (bench/daemon_load.py, the scripted model at latency 0) is started
with that `src` first on its `PYTHONPATH`; both are warmed up, then `--pairs` times each gets
`--rounds` rounds of one message per session, in turn. Printed: the median CPU per turn of
each (ms, user + system of the whole process, worker threads included), the ratio
after/before, and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.daemon_load import LoadedDaemon
from bench.figures import shm_dir


def started(src: str, stack: ExitStack) -> LoadedDaemon:
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(src).resolve()), before]))
    try:
        return stack.enter_context(LoadedDaemon(base_dir=shm_dir()))
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    names = [f"p3-{i:04d}" for i in range(args.sessions)]
    cpu: dict[str, list[float]] = {"before": [], "after": []}
    with ExitStack() as stack:
        daemons = {"before": started(args.before, stack), "after": started(args.after, stack)}
        for daemon in daemons.values():
            daemon.rounds(names, 4)
        for _ in range(args.pairs):
            for label, daemon in daemons.items():
                cpu0, n0 = daemon.cpu_seconds(), daemon.turns
                daemon.rounds(names, args.rounds)
                cpu[label].append((daemon.cpu_seconds() - cpu0) * 1000 / (daemon.turns - n0))
    before, after = statistics.median(cpu["before"]), statistics.median(cpu["after"])
    print(f"CPU per turn: before {before:.2f} ms, after {after:.2f} ms, ratio {after / before:.2f}")
    print(f"  before: {' '.join(f'{x:.2f}' for x in cpu['before'])}")
    print(f"  after:  {' '.join(f'{x:.2f}' for x in cpu['after'])}")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
