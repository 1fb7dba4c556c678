"""P5's prompt taken apart turn by turn: which part grows with a conversation's age.

Runs the same daemon and session as P5 (`bench/figures.py`: one session, the household
responder, the load channel) and prints, every `--every` turns, the parts of that turn's
prompt: the system prompt's base, the `## Conversation Summary`, whether the consolidation
warning is in it (its characters are in neither), the history sent (messages and
characters), the tool schemas, and the whole prompt in tokens as P5 counts it
(`daemon_load.prompt_tokens`). Last, the largest prompt of the 100 turns up to each of two
marks, as P5 compares them.

    python bench/p5_parts.py                    # 2,000 turns, a line every 40
    python bench/p5_parts.py --turns 400 --every 10
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.daemon_load import LoadedDaemon, QuietLLM, household_responder, prompt_tokens
from bench.figures import shm_dir
from tests.support.fake_llm import Reply

SUMMARY = "\n\n## Conversation Summary\n\n"
WARNING = "will soon be summarized"


class Parts(NamedTuple):
    base: int
    summary: int
    warning: bool
    messages: int
    history: int
    tools: int
    tokens: int


def parts_of(request: dict[str, Any]) -> Parts:
    messages = request.get("messages") or [{}]
    system = str(messages[0].get("content") or "")
    base, _, summary = system.split("\n\n[System:")[0].partition(SUMMARY)
    return Parts(
        base=len(base),
        summary=len(summary),
        warning=WARNING in system,
        messages=len(messages) - 1,
        history=sum(len(str(m.get("content") or "")) for m in messages[1:]),
        tools=len(json.dumps(request.get("tools") or [])),
        tokens=prompt_tokens(request),
    )


class PartsLLM(QuietLLM):
    """The P5 model, keeping the parts of every turn's prompt (a few numbers a turn)."""

    def __init__(self) -> None:
        super().__init__(responder=household_responder)
        self.parts: list[Parts] = []

    def next_reply(self, request: dict[str, Any], key: str = "") -> Reply:
        messages = request.get("messages") or [{}]
        if "memory consolidation" not in str(messages[0].get("content") or ""):
            self.parts.append(parts_of(request))
        return super().next_reply(request, key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--every", type=int, default=40)
    parser.add_argument("--early", type=int, default=200)
    args = parser.parse_args()
    daemon = LoadedDaemon(base_dir=shm_dir())
    llm = daemon.llm = PartsLLM()
    with daemon:
        daemon.rounds(["p5"], args.turns)
    print("turn  base  summary  warning  messages  history  tools  tokens  (characters)")
    for turn, p in enumerate(llm.parts, 1):
        if turn == 1 or turn % args.every == 0:
            print(
                f"{turn:>4} {p.base:>5} {p.summary:>8} {p.warning!s:>8} {p.messages:>9}"
                f" {p.history:>8} {p.tools:>6} {p.tokens:>7}"
            )
    for mark in (args.early, args.turns):
        window = llm.parts[max(0, mark - 100) : mark]
        peak = max(window, key=lambda p: p.tokens)
        print(f"peak of the 100 turns up to {mark}: {peak}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
