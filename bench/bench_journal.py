"""The turn journal's cost: a turn with two tool calls, with and without its journal.

A turn that asks for tools records each tool-asking answer, each call's start and each
result, fsync'd (store/journal.py); the router removes the journal after delivery. This runs
the same turn - one answer asking for two tool calls, then the final answer - through the
real AgentLoop, JSONL store and journal on a temporary directory of the real disk, with the
model scripted at the HTTP boundary (in-process, latency 0), and reports per turn: the
process CPU time and the fsync calls, with the journal and without, and their ratio. A turn
without tool calls is measured the same way: the journal must cost it nothing.

    python bench/bench_journal.py [--turns 200]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM, scripted_llm
from tests.support.prompt import StaticPrompt

from squidd.core.agent import AgentLoop, TurnServices
from squidd.core.journal import Effect
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, ToolResult
from squidd.core.resume import TurnRecording
from squidd.core.tools import ToolRegistry
from squidd.store.journal import JournalDir
from squidd.store.jsonl import JsonlStore


class Lookup:
    name = "lookup"
    description = "Look a word up."
    parameters: Mapping[str, Any] = {"type": "object", "properties": {"word": {"type": "string"}}}
    effect = Effect.READ_ONLY

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(f"{arguments.get('word')}: a word")


class FsyncCounter:
    """Counts `os.fsync` calls (the journal's and the history's) while installed."""

    def __init__(self) -> None:
        self.calls = 0
        self._real: Callable[[int], None] = os.fsync

    def __enter__(self) -> FsyncCounter:
        real = self._real

        def counting(fd: int) -> None:
            self.calls += 1
            real(fd)

        os.fsync = counting
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real


async def measure(turns: int, *, tools: bool, journal: bool) -> tuple[float, float]:
    """Per turn: CPU milliseconds and fsync calls."""
    with tempfile.TemporaryDirectory(prefix="squidd-bench-journal-", dir=Path.home()) as tmp:
        data = Path(tmp)
        mock = MockLLM()

        def answer(request: dict[str, Any]) -> Reply:
            messages = request["messages"]
            last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
            if not tools or any(m["role"] == "tool" for m in messages[last_user:]):
                return Reply(content="Both words are words.")
            return Reply(tool_calls=[("lookup", {"word": "kayak"}), ("lookup", {"word": "tea"})])

        mock.script = [answer] * (turns * 2 + 4)
        llm, _ = scripted_llm(mock=mock)
        store = JsonlStore(data)
        journals = JournalDir(data)
        loop = AgentLoop(
            llm=llm,
            services=TurnServices(
                memory=MemoryManager(store, llm, consolidation_threshold=10_000),
                registry=ToolRegistry([Lookup()]),
                prompt=StaticPrompt("You are a benchmark."),
                recording=TurnRecording(journals) if journal else None,
            ),
        )

        async def turn(i: int) -> None:
            key = f"bench:m{i}"
            await loop.run(
                SessionId(f"bench-{i % 10}"), f"look up two words {i}", "bench", turn_id=key
            )
            if journal:
                await journals.remove(key)  # what the router does after delivery

        await turn(-1)  # warm-up
        with FsyncCounter() as fsyncs:
            cpu = time.process_time()
            for i in range(turns):
                await turn(i)
            cpu = time.process_time() - cpu
        return cpu * 1000 / turns, fsyncs.calls / turns


async def figures(turns: int, repeats: int = 3) -> dict[str, float]:
    """Medians over `repeats`, each repeat measuring without and with the journal in
    alternating order (the machine is shared: a ratio within one repeat travels)."""
    # Log lines (rendered for a terminal) would be most of a turn's CPU: warnings only.
    config = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    try:
        return await _figures(turns, repeats)
    finally:
        structlog.configure(**config)


async def _figures(turns: int, repeats: int) -> dict[str, float]:
    out: dict[str, float] = {}
    await measure(max(10, turns // 4), tools=True, journal=True)  # warm-up: imports, caches
    for tools in (True, False):
        name = "tools" if tools else "plain"
        runs: list[tuple[tuple[float, float], tuple[float, float]]] = []
        for repeat in range(repeats):
            if repeat % 2:
                on = await measure(turns, tools=tools, journal=True)
                off = await measure(turns, tools=tools, journal=False)
            else:
                off = await measure(turns, tools=tools, journal=False)
                on = await measure(turns, tools=tools, journal=True)
            runs.append((off, on))
        out[f"{name}_cpu_ms_without"] = statistics.median(off[0] for off, _ in runs)
        out[f"{name}_cpu_ms_with"] = statistics.median(on[0] for _, on in runs)
        out[f"{name}_fsyncs_without"] = statistics.median(off[1] for off, _ in runs)
        out[f"{name}_fsyncs_with"] = statistics.median(on[1] for _, on in runs)
        out[f"{name}_cpu_ratio"] = statistics.median(on[0] / off[0] for off, on in runs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    result = anyio.run(figures, args.turns, args.repeats)
    for name in ("tools", "plain"):
        print(
            f"{name}: CPU {result[f'{name}_cpu_ms_without']:.2f} ms -> "
            f"{result[f'{name}_cpu_ms_with']:.2f} ms per turn "
            f"(ratio {result[f'{name}_cpu_ratio']:.2f}), fsyncs "
            f"{result[f'{name}_fsyncs_without']:.1f} -> {result[f'{name}_fsyncs_with']:.1f}"
        )


if __name__ == "__main__":
    main()
