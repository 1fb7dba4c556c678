"""Agents at rest: what ten agents add to `squidd run` over one, from spawn to READY=1 and
in idle RSS (no channel; each agent with a workspace of its own, the daemon's one chain).

Each set-up is started alternately (one agent, ten agents, one, ...), so the machine's
load falls on both alike; each figure is the median of its starts.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench.bench_start import API_KEY, start_to_ready
from tests.support.config import write_daemon_config
from tests.support.fake_llm import FakeLLM


def _config(root: Path, url: str, agents: int) -> Path:
    folder = root / f"agents-{agents}"
    folder.mkdir()
    entries = [{"name": f"agent{i}", "workspace": str(folder / f"ws{i}")} for i in range(agents)]
    return write_daemon_config(
        folder, url, api_key=API_KEY, logging={"level": "info"}, agents={"list": entries}
    )


def measure(quick: bool) -> dict[int, tuple[float, float]]:
    """{agents: (median seconds to READY=1, median idle RSS in MiB)} for 1 and 10 agents."""
    repeats = 1 if quick else 5
    with FakeLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        configs = {n: _config(root, llm.base_url, n) for n in (1, 10)}
        for config in configs.values():
            start_to_ready(config, config.parent)  # the bytecode cache, the data dir
        runs: dict[int, list[tuple[float, int]]] = {1: [], 10: []}
        for _ in range(repeats):
            for n, config in configs.items():
                runs[n].append(start_to_ready(config, config.parent))
    return {
        n: (statistics.median(t for t, _ in got), statistics.median(k for _, k in got) / 1024)
        for n, got in runs.items()
    }
