"""The questions of `squidd init --interactive`, each answer checked when it is given.

`ask_until` asks again, with the reason in plain words, until the answer passes its check
(its form first, then whatever can be tried: the endpoint answers, the login works). Each
part (the model here; Matrix and email in init_channels.py) fills `Answers`: the config
keys of its section and its secrets by credential name; a secret already given is kept when
a later answer is asked again. The current config's values are the defaults on a re-run.
"""

from __future__ import annotations

import contextlib
import getpass
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from pydantic import SecretStr, ValidationError

from squidd.config.api import DEFAULT_PORT, ApiSettings
from squidd.config.checks import check_timezone
from squidd.config.sections import LLMSettings
from squidd.ops.doctor.trials import Refused, http_url_problem, try_llm, try_models

__all__ = [
    "Answers",
    "ask",
    "ask_api",
    "ask_llm",
    "ask_secret",
    "ask_timezone",
    "ask_until",
    "machine_timezone",
    "tried",
    "yes",
]

Check = Callable[[str], "str | None"]


@dataclass
class Answers:
    """What the person said: config keys by section (`""`: the top level), and secrets by
    credential name (`matrix_password` is `[matrix] password_file`)."""

    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    removed: dict[str, list[str]] = field(default_factory=dict)
    """Keys to drop by section (a one-endpoint `[llm]`'s when a local server replaces it)."""


def ask(question: str, default: str = "") -> str:
    shown = f" [{default}]" if default else ""
    answer = input(f"{question}{shown}: ").strip()
    return answer or default


def ask_until(question: str, default: str, check: Check) -> str:
    """Ask until `check` finds nothing wrong (it returns the reason, or None)."""
    while True:
        answer = ask(question, default)
        problem = check(answer)
        if problem is None:
            return answer
        print(f"  {problem}; please try again")


def ask_secret(question: str) -> str:
    return getpass.getpass(f"{question} (not shown): ").strip()


def yes(question: str, default: bool = False) -> bool:
    answer = ask(question + (" (Y/n)" if default else " (y/N)"), "").lower()
    return default if not answer else answer.startswith("y")


def tried(say: str, trial: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Any:
    """Run one trial, telling the person what is being tried."""
    print(f"  {say}…")
    return anyio.run(trial, *args)


def _models_line(models: list[str]) -> str:
    shown = ", ".join(models[:15])
    return shown + (f" (and {len(models) - 15} more)" if len(models) > 15 else "")


def ask_llm(answers: Answers, current: dict[str, Any], current_key: str | None) -> None:
    """Endpoint, key, model: the endpoint's model list read and one model tried."""
    print("\nThe model (any OpenAI-compatible endpoint)")
    url = str(current.get("base_url") or "https://api.openai.com/v1")
    model = str(current.get("model") or "gpt-4o-mini")
    key: str | None = None  # a new key, to be written
    ask_key = True
    while True:
        url = ask_until("LLM endpoint", url, http_url_problem)
        if ask_key:
            keep = " (empty: keep the current one)" if current_key else " (empty: none)"
            key = ask_secret("API key" + keep) or None
            ask_key = False
        used = key or current_key
        settings = LLMSettings(
            base_url=url, model=model, api_key=SecretStr(used) if used else None, timeout_s=30
        )
        try:
            models = tried("listing the endpoint's models", try_models, settings)
        except Refused as exc:
            print(f"  {exc}; please try again")
            ask_key = exc.what == "key"
            continue
        if models:
            print(f"  it serves: {_models_line(models)}")
            default = model if model in models else models[0]
            model = ask_until("Model", default, partial(_unknown_model, models=models))
        else:
            model = ask("Model", model)
        settings = settings.model_copy(update={"model": model})
        try:
            tried(f"asking {model} for one token", try_llm, settings)
        except Refused as exc:
            print(f"  {exc}; please try again")
            ask_key = exc.what == "key"
            continue
        break
    answers.sections["llm"] = {"base_url": url, "model": model}
    if key:
        answers.secrets["llm_api_key"] = key


def _unknown_model(model: str, *, models: list[str]) -> str | None:
    return None if model in models else f"the endpoint serves no model {model!r}"


def machine_timezone() -> str:
    """This machine's timezone: `TZ`, /etc/timezone, or where /etc/localtime points."""
    names = [os.environ.get("TZ", "").removeprefix(":")]
    with contextlib.suppress(OSError):
        names.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    try:
        link = os.readlink("/etc/localtime")
        names.append(link.partition("zoneinfo/")[2])
    except OSError:
        pass
    for name in names:
        if name and _tz_problem(name) is None:
            return name
    return "UTC"


def _tz_problem(name: str) -> str | None:
    try:
        check_timezone(name)
    except ValueError as exc:
        return f"{exc} (a name such as Europe/Berlin or America/New_York)"
    return None


def ask_timezone(answers: Answers, current: str | None) -> None:
    print("\nYour timezone: cron jobs, the heartbeat's hours and the daily caps follow it")
    zone = ask_until("Timezone", current or machine_timezone(), _tz_problem)
    answers.sections.setdefault("", {})["timezone"] = zone


def _listen_problem(text: str) -> str | None:
    try:
        ApiSettings(listen=text)
    except ValidationError as exc:
        return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
    return None


def ask_api(answers: Answers, current: dict[str, Any]) -> None:
    print("\nThe dashboard and the OpenAI-compatible API (one listener, an API key to log in)")
    if not yes("Turn them on?", default=True):
        answers.sections["api"] = {"enabled": False}
        return
    listen = str(current.get("listen") or f"127.0.0.1:{DEFAULT_PORT}")
    listen = ask_until("Listen on", listen, _listen_problem)
    answers.sections["api"] = {"enabled": True, "listen": listen}
