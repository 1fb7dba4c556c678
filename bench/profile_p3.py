"""Where P3's CPU goes: the daemon of P3 (bench/daemon_load.py) profiled in its turns only.

    python bench/profile_p3.py [--sessions 50] [--rounds 4] [--top 40] [--out p3.prof]

The daemon is started under `bench/profiled_run.py`, which switches cProfile on at SIGUSR1
and writes the stats at SIGUSR2: after the warm-up rounds (start-up and imports are out),
around the measured rounds. Printed: the functions by their own time, the share of each
package in the main thread's own time, and the number of worker-thread hand-offs
(`anyio.to_thread.run_sync`) per turn.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench.daemon_load as daemon_load
from tests.support.daemon import run_argv


def profiled_argv(config: Path, channel: str | None = None) -> list[str]:
    argv = run_argv(config, channel)
    return [sys.executable, "-m", "bench.profiled_run", *argv[3:]]


def shares(stats: pstats.Stats) -> dict[str, float]:
    """Own time per package (squidd's subpackages apart)."""
    by: dict[str, float] = defaultdict(float)
    for (path, _line, _name), row in stats.stats.items():  # type: ignore[attr-defined]
        own = row[2]
        key = "builtins"
        for part in ("squidd/core", "squidd/store", "squidd/llm", "squidd/gateway", "squidd"):
            if f"/{part}/" in path:
                key = part
                break
        else:
            if "site-packages/" in path:
                key = path.split("site-packages/")[1].split("/")[0]
            elif "/lib/python" in path:
                key = "stdlib:" + path.rsplit("/", 1)[-1]
        by[key] += own
    return dict(by)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkstemp(suffix=".prof")[1]).resolve()
    os.environ["BENCH_PROFILE_OUT"] = str(out)
    daemon_load.run_argv = profiled_argv  # type: ignore[assignment]
    names = [f"p3-{i:04d}" for i in range(args.sessions)]
    with daemon_load.LoadedDaemon() as d:
        d.rounds(names, 2)
        os.kill(d.pid, signal.SIGUSR1)
        cpu0, n0 = d.cpu_seconds(), d.turns
        d.rounds(names, args.rounds)
        turns = d.turns - n0
        cpu_ms = (d.cpu_seconds() - cpu0) * 1000 / turns
        out.unlink(missing_ok=True)
        os.kill(d.pid, signal.SIGUSR2)
        while not out.exists() or out.stat().st_size == 0:
            time.sleep(0.1)
        time.sleep(0.5)
    stats = pstats.Stats(str(out))
    total = sum(shares(stats).values())
    print(f"turns {turns}, CPU {cpu_ms:.2f} ms per turn (profiled), load {os.getloadavg()}")
    for key, own in sorted(shares(stats).items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {key:40s} {own / turns * 1000:6.3f} ms/turn  {own / total:6.1%}")
    hand_offs = sum(
        row[1]
        for (path, _l, name), row in stats.stats.items()  # type: ignore[attr-defined]
        if name == "find_root_task"
    )
    print(f"worker-thread hand-offs per turn: {hand_offs / turns:.2f}")
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
