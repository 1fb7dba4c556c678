"""The operator's view of the providers, against scripted servers on loopback: `squidd
doctor` names each provider, each refused key by its number and file (never the key), each
pair's window (a local server's served one and where it came from, or that the configured
one is used) and warns when the fixed prompt takes over a quarter of the smallest window;
`squidd models` lists each provider's models with windows, prices and the chain's order;
`squidd config check` prints the chain and the providers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog.testing

from tests.support.cli import config_check
from tests.support.daemon import run_squidd
from tests.support.fake_llm import FakeLLM
from tests.support.local_servers import ScriptedOllama

GOOD_KEY = "sk-providers-ops-good-1"
BAD_KEY = "sk-providers-ops-refused-2"


@dataclass
class Two:
    tmp: Path
    hosted: FakeLLM
    ollama: ScriptedOllama

    def config(self, *, workspace_text: str = "", window: int = 32_000) -> Path:
        keys = []
        for number, key in enumerate((GOOD_KEY, BAD_KEY), start=1):
            path = self.tmp / f"main-key-{number}"
            path.write_text(key)
            path.chmod(0o600)
            keys.append(str(path))
        workspace = self.tmp / "workspace"
        workspace.mkdir(mode=0o700, exist_ok=True)
        if workspace_text:
            (workspace / "AGENTS.md").write_text(workspace_text)
        config = self.tmp / "config.toml"
        config.write_text(
            f"""[storage]
data_dir = "{self.tmp / "data"}"
[agents]
workspace = "{workspace}"
[llm]
max_retries = 0
context_window = {window}
chain = ["main/{self.hosted.model}", "home/qwen3"]

[[llm.providers]]
name = "main"
base_url = "{self.hosted.base_url}"
api_key_files = {json.dumps(keys)}
[[llm.providers.models]]
name = "{self.hosted.model}"
context_window = 128000
prices = {{ input = 0.15, output = 0.6 }}

[[llm.providers]]
name = "home"
kind = "ollama"
base_url = "{self.ollama.root}"
"""
        )
        return config


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Two]:
    # qwen3 is not loaded and sets no num_ctx: Ollama's default 4096 is what it serves.
    ollama = ScriptedOllama(
        {
            "qwen3:latest": {"trained": 40960},
            "llama3.2:latest": {"trained": 131072, "num_ctx": 8192},
        }
    )
    with FakeLLM() as hosted, ollama:
        hosted.refused_keys.add(BAD_KEY)
        yield Two(tmp_path, hosted, ollama)


def lines(text: str) -> dict[str, str]:
    """Each check's line (with its fix line) by its name."""
    found: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("    fix: ") and name:
            found[name] += "\n" + line
        elif ": " in line and line[:1] in "✓✗-":
            name = line[2:].split(": ", 1)[0]
            found[name] = line
    return found


def test_doctor_names_each_provider_a_refused_key_and_the_served_window(two: Two) -> None:
    result = run_squidd(two.config(), "doctor")
    assert BAD_KEY not in result.stdout + result.stderr
    assert GOOD_KEY not in result.stdout + result.stderr
    found = lines(result.stdout)
    assert found["LLM provider main"].startswith("✓")
    assert "1 of 2 key(s) taken" in found["LLM provider main"]
    refused = found["LLM provider main key 2"]
    assert refused.startswith("✗ LLM provider main key 2: key 2 of provider main refused")
    assert f"fix: replace the key in {two.tmp / 'main-key-2'} (api_key_files[1])" in refused
    assert "LLM provider main key 1" not in found
    assert found["LLM provider home"].startswith("✓")
    assert "no key" in found["LLM provider home"]
    # Each pair answers one token (the hosted one with the key it took).
    assert found["LLM answers main/fake-model"].startswith("✓")
    assert found["LLM answers home/qwen3"].startswith("✓")
    assert GOOD_KEY in two.hosted.keys and BAD_KEY not in two.hosted.keys
    window = found["LLM window home/qwen3"]
    assert "configured 32000, served 4096 (Ollama's default context" in window
    assert window.endswith("the budget uses 4096 (the server cuts it)")
    # ~1,500 tokens of fixed prompt (the default tools) against the 4,096 served: a warning.
    fixed = found["fixed prompt"]
    assert (
        fixed.startswith("✗ fixed prompt: about ") and "4,096-token window of home/qwen3" in fixed
    )
    assert "over a quarter" in fixed
    assert "num_ctx" in fixed and "OLLAMA_CONTEXT_LENGTH" in fixed and "tools.on_demand" in fixed
    assert result.returncode == 1


def test_doctor_says_when_the_server_does_not_say_its_window(two: Two) -> None:
    two.ollama.answer_raw["/api/show"] = (500, b'{"error":"model file unreadable"}')
    result = run_squidd(two.config(), "doctor", "--no-llm-call")
    found = lines(result.stdout)
    window = found["LLM window home/qwen3"]
    assert (
        window.startswith("✓") and "the server does not say: the configured 32000 is used" in window
    )
    assert "HTTP 500" in window
    # The budget then uses the configured 32,000: the fixed prompt fits in a quarter.
    assert found["fixed prompt"].startswith("✓ fixed prompt: about ")
    assert "32,000-token window" in found["fixed prompt"]
    assert found["LLM answers home/qwen3"].startswith("-")


def test_doctor_names_an_unreachable_provider(two: Two) -> None:
    config = two.config()
    two.ollama.__exit__(None, None, None)
    found = lines(run_squidd(config, "doctor", "--no-llm-call").stdout)
    home = found["LLM provider home"]
    assert home.startswith("✗ LLM provider home: ") and "connection refused" in home
    assert "ollama serve" in home
    assert found["LLM provider main"].startswith("✓")


def test_models_lists_each_provider_with_windows_prices_and_the_chain(two: Two) -> None:
    result = run_squidd(two.config(), "models")
    assert result.returncode == 0, result.stderr
    assert BAD_KEY not in result.stdout + result.stderr
    out = result.stdout.splitlines()
    assert out[0] == "chain: main/fake-model -> home/qwen3"
    assert f"provider main (openai) {two.hosted.base_url}" in out
    assert "  keys: key 1 ok, key 2 refused" in out
    [hosted] = [line for line in out if line.strip().startswith("fake-model")]
    assert "window 128000 (configured)" in hosted and "0.15 in / 0.6 out per 1M" in hosted
    assert hosted.endswith("chain #1")
    assert f"provider home (ollama) {two.ollama.root}" in out
    [qwen] = [line for line in out if line.strip().startswith("qwen3:latest")]
    assert "window 4096 (Ollama's default context, assumed 4096)" in qwen
    assert "free" in qwen and qwen.endswith("chain #2")
    [llama] = [line for line in out if line.strip().startswith("llama3.2:latest")]
    assert "window 8192 (Ollama /api/show: the Modelfile sets num_ctx 8192)" in llama
    assert "chain" not in llama

    document = json.loads(run_squidd(two.config(), "models", "--json").stdout)
    home = document["providers"][1]
    assert home["keys"] == [] and home["ok"] is True
    assert {m["name"]: m["chain"] for m in home["models"]} == {
        "qwen3:latest": 2,
        "llama3.2:latest": None,
    }


def test_models_lists_an_unreachable_provider_with_the_reason(two: Two) -> None:
    config = two.config()
    two.ollama.__exit__(None, None, None)
    result = run_squidd(config, "models")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    home = out[out.index("provider home") :]
    assert "not reachable: connection refused" in home
    assert "qwen3" in home and "chain #2" in home
    assert "fake-model" in out[: out.index("provider home")]


def test_config_check_prints_the_chain_and_the_providers(two: Two) -> None:
    result = config_check(two.config())
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "  chain:     1. main/fake-model (window 128000)" in out
    assert "             2. home/qwen3 (window 32000)" in out
    assert f"  providers: main (openai) {two.hosted.base_url}, 2 key(s)" in out
    assert f"home (ollama) {two.ollama.root}, no key (a local server needs none)" in out
    assert "llm.api_key is not set" not in out
    assert BAD_KEY not in out and GOOD_KEY not in out


@pytest.mark.anyio
async def test_the_start_up_try_warns_per_unreachable_provider(two: Two) -> None:
    from squidd.commands.run import check_model
    from squidd.config import load_settings
    from squidd.llm.health import ModelHealth

    settings = load_settings(two.config())
    two.ollama.__exit__(None, None, None)
    health = ModelHealth()
    with structlog.testing.capture_logs() as logs:
        await check_model(settings, health)
    unreachable = [e for e in logs if e["event"] == "model_unreachable_at_start"]
    assert [e["provider"] for e in unreachable] == ["home"]
    assert "connection refused" in unreachable[0]["reason"]
    refused = [e for e in logs if e["event"] == "llm_key_refused_at_start"]
    assert [(e["provider"], e["key"]) for e in refused] == [("main", "key 2")]
    assert BAD_KEY not in repr(logs)
    # main answers: the chain is not failing at start (turns fall over to it).
    assert health.start_check is not None and health.start_check["ok"] is True

    two.hosted.refused_keys.add(GOOD_KEY)  # now nobody answers
    await check_model(settings, health)
    assert health.state == "failing"
    assert "main: every key was refused" in str(health.start_check["reason"])
    assert "home: " in str(health.start_check["reason"])
