"""The benchmark runner: every figure of `bench/figures.py` in one table, and as JSON.

    python bench/run.py                 # all figures against their targets (minutes)
    python bench/run.py --quick         # small workloads: only checks the benchmarks run
    python bench/run.py --only P1 P5    # some entries
    python -m bench                     # the same as bench/run.py

Prints one row per figure (figure, value, target, pass/fail), then the machine (cores, CPU
model, memory) and the load average before and after the run (the figures are only as
quiet as the machine was), and writes the rows, the machine, the loads and the date to
`--json` (default bench/results.json). Exits 1 when a figure misses its target (not in
--quick, whose workloads are too small to hold to a target) or a benchmark fails to run.

One figure of the speed issue's table is not measured here: the CI time (`bash .ci/run` on
a fresh clone, target <= 10 minutes of tests), which `.ci/run` prints itself ("tests
took N s") and which needs a fresh clone; the table says so under its rows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import ENTRIES, Row


def machine() -> dict[str, object]:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
    }


def load_average() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


NOT_HERE = (
    "not measured here: CI time (`bash .ci/run` on a fresh clone, target <= 10 min of "
    "tests; .ci/run prints 'tests took N s')"
)


def verdict(row: Row, quick: bool) -> str:
    if row.ok is None:
        return "-"
    if quick:
        return "ran"
    return "pass" if row.ok else "FAIL"


def table(rows: list[Row], quick: bool) -> str:
    width = max([len(r.figure) for r in rows] + [6])
    lines = [f"{'figure':<{width}}  {'value':>12}  {'target':<10}  result"]
    for r in rows:
        value = f"{r.value:.2f} {r.unit}"
        lines.append(f"{r.figure:<{width}}  {value:>12}  {r.target:<10}  {verdict(r, quick)}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only check the benchmarks run")
    parser.add_argument("--only", nargs="*", default=None, metavar="ENTRY")
    parser.add_argument("--json", default=str(Path(__file__).parent / "results.json"))
    args = parser.parse_args()
    started = time.monotonic()
    load_before = load_average()
    rows: list[Row] = []
    broken: list[str] = []
    for entry in ENTRIES:
        if args.only and entry.name not in args.only:
            continue
        t0 = time.monotonic()
        try:
            got = entry.measure(args.quick)
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others
            traceback.print_exc()
            broken.append(entry.name)
            continue
        rows.extend(got)
        print(f"  {entry.name} done in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    elapsed = time.monotonic() - started
    load_after = load_average()
    box = machine()
    print(table(rows, args.quick) if rows else "no figures")
    print(NOT_HERE)
    print(
        f"({elapsed:.0f} s; medians over repeats; {box['nproc']} cores, {box['cpu']}, "
        f"{box['memory_gib']} GiB; load average (1, 5, 15 min) {load_before} before, "
        f"{load_after} after)"
    )
    if args.quick:
        print("--quick: small workloads, not held to the targets")
    if broken:
        print("did not run: " + ", ".join(broken))
    Path(args.json).write_text(
        json.dumps(
            {
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "quick": args.quick,
                "seconds": round(elapsed, 1),
                "machine": box,
                "load_before": load_before,
                "load_after": load_after,
                "rows": [asdict(r) for r in rows],
                "broken": broken,
            },
            indent=2,
        )
        + "\n"
    )
    missed = [r for r in rows if r.ok is False]
    return 1 if broken or (missed and not args.quick) else 0


if __name__ == "__main__":
    sys.exit(main())
