"""P5: one session, 2,000 turns, each with a tool result of random size up to 100 kB.

The real agent loop, memory manager, JSONL store and OpenAI adapter run against a scripted
provider (over `httpx2.MockTransport`) that reports usage like a 4-characters-per-token
model: prompt tokens = request characters / 4 (messages and tool schemas). Every turn the
model calls `fetch`, gets 0-100 kB of text, then answers; consolidation calls get a short
summary. Printed: the largest prompt any call sent, by the provider's count, divided by
the configured budget (target <= 1.0), and the tokens per turn near turn 2,000 divided by
those near turn 200 (target <= 1.2), as means over the 50 turns up to each (single turns
vary with the random result size; both are printed).

    python bench/bench_p5_budget.py [--turns 2000] [--window 32000] [--seed 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.daemon_load import prompt_tokens
from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM, scripted_llm
from tests.support.prompt import StaticPrompt

from squidd.core.agent import AgentLoop, TurnServices
from squidd.core.budget import PromptBudget
from squidd.core.memory import MemoryManager
from squidd.core.models import SessionId, ToolResult
from squidd.core.tools import ToolRegistry
from squidd.log import configure_logging
from squidd.store.jsonl import JsonlStore
from squidd.store.tool_results import ToolResultFiles
from squidd.tools.files import ReadFileTool

SESSION = SessionId("matrix:!p5:example.org")
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
]


class FetchTool:
    name = "fetch"
    description = "Fetch the next report."
    parameters: Mapping[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        size = self._rng.randint(0, 100_000)
        words = []
        total = 0
        while total < size:
            word = self._rng.choice(WORDS)
            words.append(word)
            total += len(word) + 1
        return ToolResult(" ".join(words)[:size])


class Provider:
    """Answers like a model and counts like a 4-characters-per-token tokenizer."""

    def __init__(self) -> None:
        self.prompts: list[int] = []
        self.turn_tokens: dict[int, int] = {}
        self.turn = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = prompt_tokens(body)
        self.prompts.append(prompt)
        first = body["messages"][0].get("content") or ""
        last = body["messages"][-1]
        if first.startswith("You are a memory consolidation assistant"):
            reply = Reply(content="Summary: the owner asked for reports; all were fetched. " * 4)
        elif last["role"] == "user" and not str(last.get("content")).startswith("[System"):
            reply = Reply(tool_calls=[("fetch", {"n": self.turn})])
        else:
            reply = Reply(content=f"Report {self.turn} read; nothing alarming in it.")
        completion = len(reply.content) // 4 + 10
        self.turn_tokens[self.turn] = self.turn_tokens.get(self.turn, 0) + prompt + completion
        return Reply(
            content=reply.content, tool_calls=reply.tool_calls, usage=(prompt, completion, 0)
        )


async def measure(turns: int, window: int, seed: int) -> dict[str, float]:
    """Run the session; the figures: prompt peak / budget and late / early tokens per turn."""
    configure_logging("error", "console", known_secrets=[])
    rng = random.Random(seed)
    provider = Provider()
    mock = MockLLM()
    mock.default = None
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        data = Path(tmp)
        store = JsonlStore(data, workspace_dir=data / "ws")
        (data / "ws").mkdir()
        results = ToolResultFiles(data)
        llm, mock = scripted_llm(mock=mock)
        mock.script.clear()

        def handler_reply(body: dict[str, Any]) -> Reply:
            return provider(body)

        budget = PromptBudget(context_window=window, context_budget=0.75)
        memory = MemoryManager(store, llm=llm, budget=budget)
        loop = AgentLoop(
            llm=llm,
            services=TurnServices(
                memory=memory,
                registry=ToolRegistry([FetchTool(rng), ReadFileTool(data / "ws")]),
                prompt=StaticPrompt("You are squidd, a personal assistant. " * 10),
                results=results,
                max_result_chars=16_000,
            ),
        )
        for turn in range(1, turns + 1):
            provider.turn = turn
            mock.script.extend([handler_reply] * 8)
            await loop.run(SESSION, f"Please fetch report {turn} and tell me about it.", "matrix")
            mock.script.clear()
            # Saved results are not what this bench measures; keep the disk small.
            for path in results.directory.glob("*.txt"):
                path.unlink()
        largest = max(provider.prompts)
        late_turn, early_turn = turns, max(50, turns // 10)
        late = statistics.mean(
            provider.turn_tokens[t] for t in range(late_turn - 49, late_turn + 1)
        )
        early = statistics.mean(
            provider.turn_tokens[t] for t in range(early_turn - 49, early_turn + 1)
        )
        if __name__ != "__main__":
            return {"peak": largest / budget.tokens, "growth": late / early}
        print(f"P5: {turns} turns, budget {budget.tokens} tokens (window {window})")
        print(f"  model calls: {len(provider.prompts)}")
        print(
            f"  max prompt tokens / budget: {largest} / {budget.tokens} = "
            f"{largest / budget.tokens:.3f} (target <= 1.0)"
        )
        point = provider.turn_tokens[late_turn] / provider.turn_tokens[early_turn]
        print(
            f"  tokens per turn at turn {late_turn} / turn {early_turn}: "
            f"{provider.turn_tokens[late_turn]} / {provider.turn_tokens[early_turn]} = {point:.3f}"
        )
        print(
            f"  mean tokens per turn, 50 turns up to {late_turn} / up to {early_turn}: "
            f"{late:.0f} / {early:.0f} = {late / early:.3f} (target <= 1.2)"
        )
        return {"peak": largest / budget.tokens, "growth": late / early}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    anyio.run(measure, args.turns, args.window, args.seed)
