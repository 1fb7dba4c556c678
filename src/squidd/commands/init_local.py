"""The model on a local server in `squidd init --interactive`: Ollama, llama.cpp's server or
vLLM on this machine or the network, no key asked.

The server is asked which models it serves and the context each is served with
(llm/local.py); the person picks one, which is tried with one token like a hosted model;
the config gets `[[llm.providers]]` (kind, base_url, the model with its served window)
and `[llm] chain`, and the keys of a one-endpoint `[llm]` are dropped (they would clash).
"""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from squidd.commands.init_ask import Answers, ask_until, tried
from squidd.llm.local import Kind, ServedModel
from squidd.ops.doctor.trials import (
    Refused,
    http_url_problem,
    try_local_models,
    try_local_token,
)

__all__ = ["LEGACY_KEYS", "ask_local"]

PORTS = {"ollama": 11434, "llamacpp": 8080, "vllm": 8000}
LEGACY_KEYS = ("base_url", "model", "api_key", "api_key_file", "fallback_models")
PROVIDER = "local"


def _kind_problem(text: str) -> str | None:
    return None if text in PORTS else f"answer one of: {', '.join(PORTS)}"


def _model_problem(text: str, *, names: list[str]) -> str | None:
    return None if text in names else f"the server serves no model {text!r}"


def _shown(models: list[ServedModel]) -> str:
    shown = [f"{m.name} ({m.window or '?'} tokens)" for m in models[:15]]
    more = f" (and {len(models) - 15} more)" if len(models) > 15 else ""
    return ", ".join(shown) + more


def _current(current: dict[str, Any]) -> tuple[str, str]:
    """The kind and URL of a local provider the config has now, else Ollama's defaults."""
    for provider in current.get("providers", []):
        if isinstance(provider, dict) and provider.get("kind") in PORTS:
            return str(provider["kind"]), str(provider.get("base_url", ""))
    return "ollama", ""


def ask_local(answers: Answers, current: dict[str, Any]) -> None:
    """Kind, URL, model: the server's models listed with their windows, one tried."""
    print("\nA local model server (no key needed)")
    kind, url = _current(current)
    kind = ask_until("Kind of server (ollama, llamacpp, vllm)", kind, _kind_problem)
    url = url or f"http://127.0.0.1:{PORTS[kind]}"
    while True:
        url = ask_until("Server URL", url, http_url_problem)
        try:
            models = tried("listing the server's models", try_local_models, cast(Kind, kind), url)
        except Refused as exc:
            print(f"  {exc}; please try again")
            continue
        print(f"  it serves: {_shown(models)}")
        names = [m.name for m in models]
        name = ask_until("Model", names[0], partial(_model_problem, names=names))
        try:
            tried(f"asking {name} for one token", try_local_token, kind, url, name)
        except Refused as exc:
            print(f"  {exc}; please try again")
            continue
        break
    window = next(m.window for m in models if m.name == name)
    listed: dict[str, Any] = {"name": name}
    if window is not None and window >= 1024:
        listed["context_window"] = window
        print(f"  {name} is served with {window} tokens of context: the prompt budget follows")
    answers.sections["llm"] = {
        "chain": [f"{PROVIDER}/{name}"],
        "providers": [{"name": PROVIDER, "kind": kind, "base_url": url, "models": [listed]}],
    }
    answers.removed["llm"] = list(LEGACY_KEYS)
