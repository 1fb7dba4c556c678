"""A local model server that serves less than the configured window: the daemon asks it at
start (a scripted Ollama with the model loaded at 4,096 tokens), the prompt budget follows
the served window, a long conversation is consolidated to fit, and no request the server
gets is longer than what it serves (Ollama would cut it without a word)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_llm import Reply
from tests.support.gateway import eventually, make_settings, running_daemon
from tests.support.local_servers import ScriptedOllama
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

SERVED = 4096
CHARS_PER_TOKEN = 4  # how this server counts (and reports) tokens


def _tokens(request: dict[str, Any]) -> int:
    """The request's size as this server counts it: all the text it was sent."""
    text = json.dumps(request.get("messages", [])) + json.dumps(request.get("tools", []))
    return len(text) // CHARS_PER_TOKEN


def _answer(request: dict[str, Any]) -> Reply:
    # Usage as the server counts it, so the daemon's estimate learns its ratio.
    prompt = _tokens(request)
    if any("summar" in str(m.get("content", "")).lower() for m in request["messages"][:1]):
        return Reply(content="Earlier: a long talk about the garden.", usage=(prompt, 12, 0))
    return Reply(content="Noted, and here is a long enough answer. " * 3, usage=(prompt, 30, 0))


async def test_the_served_window_sets_the_budget_and_nothing_is_cut(tmp_path: Path) -> None:
    models = {"qwen3:8b": {"trained": 40960, "num_ctx": None, "loaded": SERVED}}
    with ScriptedOllama(models) as server:
        server.chat.responder = _answer
        settings = make_settings(
            tmp_path / "data",
            "http://unused.invalid/v1",
            llm={
                "providers": [
                    {
                        "name": "local",
                        "kind": "ollama",
                        "base_url": server.root,
                        "models": [{"name": "qwen3:8b", "context_window": 32768}],
                    }
                ],
                "chain": ["local/qwen3:8b"],
            },
            agents={"consolidation_threshold": 400},  # the budget, not the count, consolidates
        )
        channel = MemoryChannel("memory")
        paragraph = "My garden has roses, tulips and a very old apple tree by the wall. " * 14
        async with running_daemon(settings, [channel]) as daemon:
            assert daemon.runtime.memory.budget is not None
            assert daemon.runtime.memory.budget.context_window == SERVED
            for i in range(40):
                channel.inject(f"{i}: {paragraph}", session="garden", source_id=f"m{i}")
                await channel.wait_for(i + 1, what="acked")
            await eventually(lambda: len(channel.sent) == 40)
            snapshot = await daemon.snapshot()
    sizes = [_tokens(request) for request in server.chat.chat_requests]
    assert max(sizes) <= SERVED, sizes
    assert server.count("/api/ps") >= 1  # asked at start
    # 40 paragraphs are far more than 4,096 tokens: the history was consolidated to fit.
    assert sum(len(paragraph) // CHARS_PER_TOKEN for _ in range(40)) > 2 * SERVED
    summary = tmp_path / "data" / "memory"
    assert any(path.name == "summary.md" for path in summary.rglob("*"))
    [local] = snapshot["model"]["providers"]
    assert local["windows"]["qwen3:8b"]["served"] == SERVED
    assert snapshot["model"]["context_window"] == SERVED
