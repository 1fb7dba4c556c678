"""P8: how much of a turn's prompt a provider's prompt cache can serve, with hybrid
recall's automatic step on (and off, for comparison).

One person talks to one agent for `--turns` turns in one conversation, each question about
something said long ago (planted in another conversation of hers and embedded first); the
automatic step (`[memory.recall] auto = true`) adds its snippets to each turn's new message
only. For every turn after the first, against the previous turn's request (the messages as
sent, JSON):

* P8, the stable prefix kept: the longest common prefix over the previous request without
  its last message (the system prompt and the history before the new message). Target:
  >= 95%; the step is built to keep it whole (100%).
* the previous request served: the same prefix over the previous request whole. The
  snippets ride only in a turn's new message and are not kept in the history, so the next
  turn cannot reuse them: this share is below P8 by about the snippets' size, less as the
  conversation grows.

Each figure is the sum of the prefixes over the sum of the lengths (a cache's hit rate by
characters). The models are scripted servers on loopback (tests/support/fake_llm.py,
fake_embeddings.py), as in the tests.

    python bench/bench_p8.py [--turns 40]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fake_embeddings import EmbeddingsServer
from tests.support.fake_llm import FakeLLM, Reply

from squidd.config import Settings
from squidd.core.models import Message, SessionId
from squidd.gateway.runtime import build_runtime

PERSON = "alice@example.org"
FACTS = [
    "my sister's birthday is in March",
    "I am allergic to peanuts",
    "my car is a red automobile",
]
QUESTIONS = [
    "when is my sibling born?",
    "any groundnut intolerance I told you about?",
    "what colour is my vehicle?",
]


def _settings(root: Path, chat: FakeLLM, emb: EmbeddingsServer, auto: bool) -> Settings:
    return Settings.model_validate(
        {
            "llm": {
                "providers": [
                    {"name": "chat", "base_url": chat.base_url, "models": [{"name": "m"}]},
                    {"name": "emb", "base_url": emb.base_url},
                ],
                "chain": ["chat/m"],
                "max_retries": 0,
            },
            "storage": {"data_dir": str(root / ("on" if auto else "off"))},
            "agents": {"consolidation_threshold": 1000},
            "memory": {"recall": {"embeddings": f"emb/{emb.model}", "auto": auto}},
        }
    )


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _shares(requests: list[list[dict[str, Any]]]) -> tuple[float, float]:
    """(stable prefix kept, previous request served), as fractions."""
    kept = stable = served = whole = 0
    for before, now in itertools.pairwise(requests):
        now_text = json.dumps(now, ensure_ascii=False)
        head = json.dumps(before[:-1], ensure_ascii=False)[:-1]  # without the closing ]
        kept += _common(head, now_text)
        stable += len(head)
        before_text = json.dumps(before, ensure_ascii=False)
        served += _common(before_text, now_text)
        whole += len(before_text)
    return (kept / stable if stable else 0.0), (served / whole if whole else 0.0)


async def _run(turns: int, auto: bool, root: Path) -> tuple[float, float]:
    with FakeLLM(responder=lambda _: Reply(content="noted")) as chat, EmbeddingsServer() as emb:
        runtime = build_runtime(_settings(root, chat, emb, auto))
        try:
            said = [
                Message(role="user", content=f"note {i}: {FACTS[i % len(FACTS)]}", by=PERSON)
                for i in range(30)
            ]
            await runtime.store.append_messages(SessionId("mail:alice-old"), said)
            if runtime.recall is not None:
                await runtime.recall.catch_up()
            session = SessionId("mail:alice-now")
            for turn in range(turns):
                question = QUESTIONS[turn % len(QUESTIONS)]
                await runtime.agent.run(session, question, "email", person=PERSON, memory_of=PERSON)
        finally:
            await runtime.aclose()
        return _shares([r["messages"] for r in chat.chat_requests])


def measure(turns: int = 40) -> dict[str, tuple[float, float]]:
    """{"on": (P8, previous request served), "off": (the same)}."""
    with tempfile.TemporaryDirectory() as tmp:
        on = anyio.run(_run, turns, True, Path(tmp))
        off = anyio.run(_run, turns, False, Path(tmp))
    return {"on": on, "off": off}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    got = measure(args.turns)
    (p8, served), (p8_off, served_off) = got["on"], got["off"]
    print(f"P8 stable prefix kept, automatic recall on: {p8:.1%} (target >= 95%)")
    print(f"previous request served, automatic recall on: {served:.1%}")
    print(f"off: P8 {p8_off:.1%}, previous request served {served_off:.1%}")


if __name__ == "__main__":
    main()
