"""`squidd init --interactive` with a local model server, typed on a pseudo-terminal against
a scripted Ollama: no key is asked, the server's models are listed with the context each is
served with, a model it does not serve is asked again, the chosen one answers one token,
and the config written has `[[llm.providers]]` with the served window and the chain, which
`squidd doctor` then reads. Run again on a one-endpoint config, the local server replaces
`[llm]`'s endpoint keys and the file's comments stay."""

from __future__ import annotations

import tomllib
from pathlib import Path

from squidd.config import load_settings
from tests.onboarding.terminal import Terminal
from tests.support.daemon import run_squidd
from tests.support.local_servers import ScriptedOllama

CHOICE = r"2 a local model server \(Ollama, llama\.cpp, vLLM\) \[[12]\]: "


def _ollama() -> ScriptedOllama:
    return ScriptedOllama(
        {
            "qwen3:latest": {"trained": 40960, "loaded": 8192},
            "llama3.2:latest": {"trained": 131072, "num_ctx": 16384},
        }
    )


def test_a_first_run_with_a_local_ollama(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "config.toml"
    home = tmp_path / "home"
    home.mkdir()
    with _ollama() as ollama:
        term = Terminal(config, "init", "--interactive", home=home)
        try:
            term.answer(r"Data directory \[[^\]]*\]: ", str(tmp_path / "data"))
            term.answer(r"Timezone \[[^\]]*\]: ", "Europe/Berlin")
            term.answer(CHOICE, "3")
            term.expect(r"answer 1 or 2; please try again")
            term.answer(CHOICE, "2")
            term.answer(r"Kind of server \(ollama, llamacpp, vllm\) \[ollama\]: ", "")
            term.answer(r"Server URL \[http://127\.0\.0\.1:11434\]: ", ollama.root)
            term.expect(
                r"it serves: qwen3:latest \(8192 tokens\), llama3\.2:latest \(16384 tokens\)"
            )
            term.answer(r"Model \[qwen3:latest\]: ", "mistral")
            term.expect(r"the server serves no model 'mistral'; please try again")
            term.answer(r"Model \[qwen3:latest\]: ", "llama3.2:latest")
            term.expect(r"llama3\.2:latest is served with 16384 tokens of context")
            term.answer(r"Set up Matrix\? \(y/N\): ", "")
            term.answer(r"Set up email\? \(y/N\): ", "")
            term.answer(r"Turn them on\? \(Y/n\): ", "n")
            term.expect(r"Next \(each runs as printed\)")
            assert term.wait() == 0, term.output
        finally:
            term.kill()
        assert "API key (" not in term.output  # no key asked
        assert ollama.chat.chat_requests[-1]["model"] == "llama3.2:latest"
        data = tomllib.loads(config.read_text())
        assert data["llm"] == {
            "chain": ["local/llama3.2:latest"],
            "providers": [
                {
                    "name": "local",
                    "kind": "ollama",
                    "base_url": ollama.root,
                    "models": [{"name": "llama3.2:latest", "context_window": 16384}],
                }
            ],
        }
        assert [p.name for p in config.parent.iterdir()] == ["config.toml"]  # no key file
        settings = load_settings(config)
        assert [e.label for e in settings.llm.resolved_chain()] == ["local/llama3.2:latest"]

        doctor = run_squidd(config, "doctor", "--no-llm-call")
        assert "✓ LLM provider local: " in doctor.stdout
        assert "served 16384 (Ollama /api/show: the Modelfile sets num_ctx 16384)" in doctor.stdout


def test_a_rerun_replaces_the_endpoint_with_a_local_server(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    before = f'# mine\n[storage]\ndata_dir = "{tmp_path / "data"}"\n\n[llm]\n'
    before += 'base_url = "http://127.0.0.1:9/v1"\nmodel = "old"\ntimeout_s = 90  # slow box\n'
    config.write_text(before)
    with _ollama() as ollama:
        term = Terminal(config, "init", "--interactive")
        try:
            term.answer(r"Part: ", "1")
            term.answer(CHOICE, "2")
            term.answer(r"Kind of server .*\[ollama\]: ", "")
            term.answer(r"Server URL \[[^\]]*\]: ", ollama.root)
            term.answer(r"Model \[qwen3:latest\]: ", "")
            term.expect(r"Next \(each runs as printed\)")
            assert term.wait() == 0, term.output
        finally:
            term.kill()
    after = config.read_text()
    assert after.startswith("# mine\n") and "timeout_s = 90  # slow box" in after
    assert 'model = "old"' not in after and "127.0.0.1:9" not in after
    settings = load_settings(config)
    [entry] = settings.llm.resolved_chain()
    assert (entry.label, entry.context_window) == ("local/qwen3:latest", 8192)
