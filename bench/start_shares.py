"""What `squidd run`'s start costs, library by library (docs/performance.md, "Start and idle
memory").

    python bench/start_shares.py              # no channel
    python bench/start_shares.py --channels   # Matrix + email against the local test servers

The daemon is started as P4 starts it (bench/bench_start.py: the scripted model, its own
bytecode cache filled by a first start), then once more under `-X importtime`, stopped a
second after READY=1. Printed: the seconds to READY=1 and the idle VmRSS of that start
(importtime's own cost included), then per top-level package the import time it took
(its modules' own time, summed) and the resident memory it added, found by importing the
same modules in the same order in a fresh interpreter and reading VmRSS after each.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_start
from bench.daemon_load import rss_kib
from tests.support.config import write_daemon_config
from tests.support.fake_llm import FakeLLM

_LINE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)")

SHARES = """
import importlib, json, sys
def rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
shares, start, split = {}, rss(), json.loads(sys.argv[2])
for name in json.loads(sys.argv[1]):
    before = rss()
    try:
        importlib.import_module(name)
    except Exception:
        continue
    parts = name.split(".")
    top = ".".join(parts[:3]) if parts[0] in split else parts[0]
    shares[top] = shares.get(top, 0) + rss() - before
print(json.dumps({"interpreter": start, **shares}))
"""


def traced_start(config: Path, root: Path) -> tuple[float, int, str]:
    """(seconds to READY=1, idle VmRSS in KiB, importtime's report) of one start."""
    address = str(root / "notify-shares.sock")
    report = root / "importtime.txt"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify, report.open("w") as err:
        notify.bind(address)
        notify.settimeout(60)
        started = time.monotonic()
        argv = [sys.executable, "-X", "importtime", "-m", "squidd", "--config", str(config)]
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and argv
            [*argv, "run"],
            env=bench_start._child_env(root, NOTIFY_SOCKET=address),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
            elapsed = time.monotonic() - started
            time.sleep(1.0)
            rss = rss_kib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return elapsed, rss, report.read_text()


def shares(report: str, root: Path, split: list[str]) -> list[tuple[str, float, float]]:
    """(package, import ms, MiB added), largest memory first; the packages in `split` by
    their modules two levels down."""
    names: list[str] = []
    times: dict[str, float] = {}
    for match in _LINE.finditer(report):
        own_us, name = int(match.group(1)), match.group(2)
        names.append(name)
        parts = name.split(".")
        top = ".".join(parts[:3]) if parts[0] in split else parts[0]
        times[top] = times.get(top, 0.0) + own_us / 1000
    probe = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", SHARES, json.dumps(names), json.dumps(split)],
        env=bench_start._child_env(root),
        capture_output=True,
        text=True,
        check=True,
    )
    memory: dict[str, int] = json.loads(probe.stdout)
    print(f"interpreter alone: {memory.pop('interpreter') / 1024:.1f} MiB")
    rows = [(top, times.get(top, 0.0), kib / 1024) for top, kib in memory.items()]
    return sorted(rows, key=lambda row: -row[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", action="store_true", help="Matrix + email on")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--split", nargs="*", default=[], help="packages shown by module")
    parser.add_argument("--report", type=Path, help="keep importtime's report in this file")
    args = parser.parse_args()
    with ExitStack() as stack:
        llm = stack.enter_context(FakeLLM())
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sections = stack.enter_context(bench_start.channel_servers()) if args.channels else {}
        config = write_daemon_config(
            root, llm.base_url, api_key=bench_start.API_KEY, logging={"level": "info"}, **sections
        )
        bench_start.start_to_ready(config, root)  # the bytecode cache, Matrix's device
        elapsed, rss, report = traced_start(config, root)
        if args.report:
            args.report.write_text(report)
        print(f"READY=1 after {elapsed:.2f} s (under importtime); idle VmRSS {rss / 1024:.1f} MiB")
        print(f"{'package':<24} {'import ms':>9} {'MiB':>6}")
        for top, ms, mib in shares(report, root, args.split)[: args.top]:
            print(f"{top:<24} {ms:9.0f} {mib:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
