"""The provider chain against scripted OpenAI-compatible servers on 127.0.0.1 (real HTTP,
the documented error shapes): fall-over on 503, a stream cut mid-answer, a timeout, a
refused key, 429 with Retry-After, a spent quota; the circuit breaker's cooldown (no request
to a cooling provider, then one probe); key rotation; a strict `/model` choice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from squidd.config.sections import LLMSettings
from squidd.core.models import Message, StreamRestart, TextDelta, Usage
from squidd.errors import LLMCredentialsError, LLMUnavailableError
from squidd.llm.chain import ProviderChain
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.mock_llm import collect, text_of

pytestmark = pytest.mark.anyio

HELLO = [Message(role="user", content="hello")]
LONG = "The primary's answer goes on and on. " * 12  # over 200 characters


class Clock:
    """A monotonic clock the test moves by hand (the breaker's cooldowns)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _no_sleep(_: float) -> None:
    return None


@pytest.fixture
def servers() -> Iterator[tuple[FakeLLM, FakeLLM]]:
    with FakeLLM() as a, FakeLLM() as b:
        yield a, b


def key_files(tmp_path: Path, *keys: str) -> list[str]:
    paths = []
    for number, key in enumerate(keys, 1):
        path = tmp_path / f"key-{number}"
        path.write_text(key + "\n")
        paths.append(str(path))
    return paths


def chain_of(
    a: FakeLLM,
    b: FakeLLM,
    *,
    a_keys: list[str] | None = None,
    clock: Clock | None = None,
    **llm: Any,
) -> ProviderChain:
    settings = LLMSettings(
        providers=[
            {"name": "A", "base_url": a.base_url, "api_key_files": a_keys or []},
            {"name": "B", "base_url": b.base_url},
        ],
        chain=["A/model-a", "B/model-b"],
        **{"max_retries": 0, "timeout_s": 5.0, **llm},
    )
    return ProviderChain(settings, sleep=_no_sleep, clock=clock or Clock())


def warnings(logs: list[dict[str, Any]]) -> list[str]:
    return [entry["event"] for entry in logs if entry["log_level"] == "warning"]


async def test_a_503_falls_over_to_b_with_one_warning(servers: tuple[FakeLLM, FakeLLM]) -> None:
    a, b = servers
    a.push(Reply(status=503))
    b.push(Reply(content="from B", usage=(10, 3, 0)))
    chain = chain_of(a, b)
    with capture_logs() as logs:
        events = await collect(chain.chat(HELLO, []))
    await chain.aclose()
    assert text_of(events) == "from B"
    assert [e for e in events if isinstance(e, Usage)] == [Usage("model-b", 10, 3, 0, "B")]
    assert warnings(logs) == ["llm_failover"]
    [line] = [entry for entry in logs if entry["event"] == "llm_failover"]
    assert (line["from_"], line["to"]) == ("A/model-a", "B/model-b")
    assert "HTTP 503" in line["reason"]
    assert [f.to for f in chain.failovers] == ["B/model-b"]
    assert len(a.requests) == 1 and len(b.requests) == 1


async def test_a_stream_cut_after_200_characters_gives_only_bs_whole_answer(
    servers: tuple[FakeLLM, FakeLLM],
) -> None:
    a, b = servers
    a.push(Reply(content=LONG, cut_after=210))
    b.push(Reply(content="B's whole answer."))
    chain = chain_of(a, b)
    events = await collect(chain.chat(HELLO, []))
    await chain.aclose()
    streamed_from_a = "".join(
        e.text
        for e in events[: events.index(next(e for e in events if isinstance(e, StreamRestart)))]
        if isinstance(e, TextDelta)
    )
    assert len(streamed_from_a) >= 200  # A had really begun
    assert sum(isinstance(e, StreamRestart) for e in events) == 1
    assert text_of(events) == "B's whole answer."


async def test_a_timeout_falls_over(servers: tuple[FakeLLM, FakeLLM]) -> None:
    a, b = servers
    a.push(Reply(content="too late", delay=3.0))
    b.push("in time")
    chain = chain_of(a, b, timeout_s=0.5)
    assert text_of(await collect(chain.chat(HELLO, []))) == "in time"
    await chain.aclose()


async def test_refused_keys_next_key_then_b_operator_told_once_a_left_alone(
    tmp_path: Path, servers: tuple[FakeLLM, FakeLLM]
) -> None:
    a, b = servers
    keys = key_files(tmp_path, "sk-a-first-0001", "sk-a-second-0002")
    clock = Clock()
    chain = chain_of(a, b, a_keys=keys, clock=clock)
    # Key 1 refused: key 2 answers at once.
    a.push(Reply(status=401), "from A with key 2")
    with capture_logs() as logs:
        assert text_of(await collect(chain.chat(HELLO, []))) == "from A with key 2"
    assert a.keys == ["sk-a-first-0001", "sk-a-second-0002"]
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["llm_key_refused"]
    assert "sk-a" not in repr(logs)
    # Key 2 refused too: B answers; the operator is told of key 2 once, never of key 1 again.
    a.push(Reply(status=401))
    b.push("from B")
    with capture_logs() as logs:
        assert text_of(await collect(chain.chat(HELLO, []))) == "from B"
        b.push("from B again")
        assert text_of(await collect(chain.chat(HELLO, []))) == "from B again"
    refused = [e for e in logs if e["event"] == "llm_key_refused"]
    assert [e["key"] for e in refused] == ["key 2"]
    assert len(a.requests) == 3  # A was not asked by the second call
    [state] = [p for p in chain.snapshot()["providers"] if p["name"] == "A"]
    assert state["state"] == "key refused"
    assert [k["state"] for k in state["keys"]] == ["refused", "refused"]
    assert "sk-a" not in repr(chain.snapshot())
    # After the cooldown A is probed again (a key may have been replaced upstream).
    clock.now += 61
    a.push("A is back")
    assert text_of(await collect(chain.chat(HELLO, []))) == "A is back"
    await chain.aclose()


async def test_every_key_refused_everywhere_is_a_credentials_error(
    servers: tuple[FakeLLM, FakeLLM],
) -> None:
    a, b = servers
    a.push(Reply(status=401))
    b.push(Reply(status=403))
    chain = chain_of(a, b, max_retries=3)
    with pytest.raises(LLMCredentialsError):
        await collect(chain.chat(HELLO, []))
    assert len(a.requests) == 1 and len(b.requests) == 1  # no backoff can mend a key
    await chain.aclose()


async def test_cooling_costs_no_request_then_one_probe_then_back_to_a(
    servers: tuple[FakeLLM, FakeLLM],
) -> None:
    a, b = servers
    clock = Clock()
    chain = chain_of(a, b, clock=clock, failures_to_cool=3, cooldown_s=60)
    for turn in range(3):
        a.push(Reply(status=500))
        b.push(f"B answers {turn}")
        assert text_of(await collect(chain.chat(HELLO, []))) == f"B answers {turn}"
    assert len(a.requests) == 3  # the third failure opened the breaker
    for turn in range(5):
        b.push(f"B alone {turn}")
        assert text_of(await collect(chain.chat(HELLO, []))) == f"B alone {turn}"
        clock.now += 10
    assert len(a.requests) == 3  # 0 requests per turn while A cools
    clock.now += 11  # past the 60 s
    a.push("A again")
    assert text_of(await collect(chain.chat(HELLO, []))) == "A again"
    a.push("A still")
    assert text_of(await collect(chain.chat(HELLO, []))) == "A still"
    assert len(a.requests) == 5 and len(b.requests) == 8
    await chain.aclose()


async def test_a_failed_probe_cools_again_at_once(servers: tuple[FakeLLM, FakeLLM]) -> None:
    a, b = servers
    clock = Clock()
    chain = chain_of(a, b, clock=clock, failures_to_cool=1, cooldown_s=60)
    a.push(Reply(status=502))
    b.push("B")
    await collect(chain.chat(HELLO, []))
    clock.now += 61
    a.push(Reply(status=502))
    b.push("B after the probe")
    assert text_of(await collect(chain.chat(HELLO, []))) == "B after the probe"
    b.push("B while cooling")
    assert text_of(await collect(chain.chat(HELLO, []))) == "B while cooling"
    assert len(a.requests) == 2
    await chain.aclose()


async def test_retry_after_sets_the_cooldown(servers: tuple[FakeLLM, FakeLLM]) -> None:
    a, b = servers
    clock = Clock()
    chain = chain_of(a, b, clock=clock, cooldown_s=600)
    a.push(Reply(status=429, headers={"Retry-After": "30"}))
    b.push("B")
    await collect(chain.chat(HELLO, []))
    clock.now += 20
    b.push("B, A still waits")
    assert text_of(await collect(chain.chat(HELLO, []))) == "B, A still waits"
    assert len(a.requests) == 1
    clock.now += 11
    a.push("A after its Retry-After")
    assert text_of(await collect(chain.chat(HELLO, []))) == "A after its Retry-After"
    await chain.aclose()


async def test_a_503_with_a_rate_limit_reset_header_cools_for_that_long(
    servers: tuple[FakeLLM, FakeLLM],
) -> None:
    a, b = servers
    clock = Clock()
    chain = chain_of(a, b, clock=clock, cooldown_s=600)
    a.push(Reply(status=503, headers={"x-ratelimit-reset-requests": "1m30s"}))
    b.push("B")
    await collect(chain.chat(HELLO, []))
    [state] = [p for p in chain.snapshot()["providers"] if p["name"] == "A"]
    assert state["state"] == "cooling down" and state["cooling_until"]
    clock.now += 91
    a.push("A")
    assert text_of(await collect(chain.chat(HELLO, []))) == "A"
    await chain.aclose()


async def test_429_rotates_to_the_least_recently_failed_key(
    tmp_path: Path, servers: tuple[FakeLLM, FakeLLM]
) -> None:
    a, b = servers
    keys = key_files(tmp_path, "sk-one", "sk-two", "sk-three")
    clock = Clock()
    chain = chain_of(a, b, a_keys=keys, clock=clock)
    a.push(Reply(status=429), "with key 2")
    assert text_of(await collect(chain.chat(HELLO, []))) == "with key 2"
    clock.now += 1
    a.push(Reply(status=429), "with key 3")
    assert text_of(await collect(chain.chat(HELLO, []))) == "with key 3"
    clock.now += 1
    a.push("with key 3 again")  # never failed, so first in line
    assert text_of(await collect(chain.chat(HELLO, []))) == "with key 3 again"
    assert a.keys == ["sk-one", "sk-two", "sk-two", "sk-three", "sk-three"]
    assert b.requests == []
    await chain.aclose()


async def test_a_spent_quota_rests_the_key_for_the_cooldown(
    tmp_path: Path, servers: tuple[FakeLLM, FakeLLM]
) -> None:
    a, b = servers
    keys = key_files(tmp_path, "sk-spent", "sk-fresh")
    clock = Clock()
    chain = chain_of(a, b, a_keys=keys, clock=clock, cooldown_s=60)
    a.push(Reply(status=429, error_code="insufficient_quota"), "fresh key")
    assert text_of(await collect(chain.chat(HELLO, []))) == "fresh key"
    clock.now += 30
    a.push(Reply(status=429, error_code="insufficient_quota"))
    b.push("B, both keys spent")
    assert text_of(await collect(chain.chat(HELLO, []))) == "B, both keys spent"
    [state] = [p for p in chain.snapshot()["providers"] if p["name"] == "A"]
    assert [k["state"].split(" ")[0] for k in state["keys"]] == ["resting", "resting"]
    assert a.keys == ["sk-spent", "sk-fresh", "sk-fresh"]
    await chain.aclose()


async def test_a_strict_model_choice_never_switches(servers: tuple[FakeLLM, FakeLLM]) -> None:
    a, b = servers
    a.push(Reply(status=503))
    chain = chain_of(a, b)
    only_a = chain.restricted_to("A/model-a")
    with pytest.raises(LLMUnavailableError):
        await collect(only_a.chat(HELLO, []))
    assert b.requests == []
    b.push("chosen B")
    only_b = chain.restricted_to("B/model-b")
    assert text_of(await collect(only_b.chat(HELLO, []))) == "chosen B"
    assert [r["model"] for r in b.requests] == ["model-b"]
    assert chain.models == ["A/model-a", "B/model-b"]
    await chain.aclose()


async def test_the_whole_chain_failing_waits_for_the_first_cooldown_to_end(
    servers: tuple[FakeLLM, FakeLLM],
) -> None:
    a, b = servers
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    settings = LLMSettings(
        providers=[{"name": "A", "base_url": a.base_url}, {"name": "B", "base_url": b.base_url}],
        chain=["A/model-a", "B/model-b"],
        max_retries=1,
        timeout_s=5.0,
    )
    chain = ProviderChain(settings, sleep=sleep, clock=Clock())
    a.push(Reply(status=429, headers={"Retry-After": "4"}), "A after 4 s")
    b.push(Reply(status=429, headers={"Retry-After": "9"}))
    assert text_of(await collect(chain.chat(HELLO, []))) == "A after 4 s"
    assert slept == [4.0]
    await chain.aclose()


def test_no_key_in_a_log_line_or_error(tmp_path: Path) -> None:
    keys = key_files(tmp_path, "sk-secret-value-xyz")
    settings = LLMSettings(
        providers=[{"name": "A", "base_url": "http://127.0.0.1:9/v1", "api_key_files": keys}],
        chain=["A/m"],
    )
    assert "sk-secret" not in repr(settings) and "sk-secret" not in str(settings.model_dump())
    structlog.get_logger().info("settings", llm=settings)
