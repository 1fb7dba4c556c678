"""Scenario j (tests/scenarios/README.md): the provider chain through `squidd run` on
Synapse: the primary model server goes away in the middle of a conversation, every
message is answered once by the secondary (and the
primary is left alone while it cools down), the primary comes back and answers again after
its cooldown; the ledger, `squidd status` and `squidd usage` say who answered and why the
daemon fell over."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.config import provider
from tests.support.daemon import run_squidd
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix_daemon import MatrixScene, matrix_daemon_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

SECONDARY_LATENCY = 0.3


def _last_user(request: dict[str, Any]) -> str:
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    return str(users[-1]["content"])


def _primary(request: dict[str, Any]) -> Reply:
    return Reply(content=f"echo: {_last_user(request)}", usage=(40, 3, 0))


def _secondary(request: dict[str, Any]) -> Reply:
    return Reply(content=f"B: {_last_user(request)}", delay=SECONDARY_LATENCY, usage=(40, 4, 0))


def _ledger(data: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted((data / "usage").glob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines() if line]
    return lines


def chain_config(scene: MatrixScene, secondary: FakeLLM, alice: str) -> Path:
    llm = {
        "providers": [provider("A", scene.fake_llm), provider("B", secondary)],
        "chain": ["A/model-a", "B/model-b"],
        "cooldown_s": 4.0,
        "failures_to_cool": 2,
        "max_retries": 0,
        "connect_timeout_s": 1.0,
    }
    return matrix_daemon_config(
        scene.tmp_path, scene.fake_llm, scene.synapse, scene.bot, alice, llm=llm
    )


async def test_primary_away_secondary_answers_primary_back_after_cooldown(
    scene: MatrixScene,
) -> None:
    primary = scene.fake_llm
    primary.responder = _primary
    alice = await scene.make_human("alice")
    room = await alice.create_room([scene.bot.user_id], direct=True)
    with FakeLLM(responder=_secondary) as secondary:
        config = chain_config(scene, secondary, alice.user_id)
        daemon = await scene.matrix_squidd.again(config, "squidd.log")
        bot = scene.bot.user_id

        asked: list[str] = []

        async def ask(text: str) -> tuple[str, float]:
            event = await alice.send(room, text)
            asked.append(event)
            sent = time.monotonic()
            await alice.wait_for(lambda: alice.replies_to(bot, event), f"the answer to {text}")
            [reply] = alice.replies_to(bot, event)
            return str(reply.content["body"]), time.monotonic() - sent

        assert (await ask("one"))[0] == "echo: one"  # the primary answers
        port = primary.port
        primary.stop()  # the primary goes away mid-conversation
        answered_by_b = [await ask(f"away {i}") for i in range(4)]
        assert [text for text, _ in answered_by_b] == [f"B: away {i}" for i in range(4)]

        primary.start(port=port)  # back on its address; cooling still
        back: list[str] = []
        for i in range(40):  # until the cooldown is over and the probe finds it
            text, _ = await ask(f"back {i}")
            back.append(text)
            if text.startswith("echo:"):
                break
        assert back[-1] == f"echo: back {len(back) - 1}"
        assert all(t == f"B: back {i}" for i, t in enumerate(back[:-1]))
        assert (await ask("after"))[0] == "echo: after"  # the head of the chain again

        status = run_squidd(config, "status")
        assert status.returncode == 0, status.stderr
        usage = run_squidd(config, "usage", "--by", "provider")
        assert await daemon.stop() == 0

    # Every message once; the ledger names who answered each.
    await alice.sync()
    assert [len(alice.replies_to(bot, event)) for event in asked] == [1] * len(asked)
    ledger = _ledger(scene.tmp_path / "data")
    providers = [line["provider"] for line in ledger if line["purpose"] == "turn"]
    assert providers.count("B") == 4 + len(back) - 1
    assert providers.count("A") == 3
    assert "provider A:" in status.stdout and "provider B:" in status.stdout
    assert "failovers today:" in status.stdout and "A/model-a -> B/model-b" in status.stdout
    assert "failovers:" in usage.stdout and "A/model-a -> B/model-b" in usage.stdout
    by_provider = usage.stdout.split("by provider:")[1]
    assert "  A " in by_provider and "  B " in by_provider
    # Back up, the primary was not asked while it cooled: one probe found it.
    assert len(primary.chat_requests) == 3
    latencies = [seconds for _, seconds in answered_by_b]
    print(f"secondary answers while the primary was away: {[round(s, 2) for s in latencies]} s")
