"""`squidd init --interactive`: a set-up that checks each answer as it is given.

First run: the data directory, the timezone (the machine's offered), the model (its list
read from the endpoint, one token tried), then Matrix, email and the API/dashboard if
wanted; each answer is asked again with the reason until it works (init_ask.py,
init_channels.py). Run again on an existing config, it offers to change one part (model,
Matrix, email, API/dashboard, timezone, service install) and keeps everything else of the
file, comments included (init_file.py). Nothing is written before every question of the
run is answered and tried; Ctrl-C leaves nothing. Then the workspace, the Matrix identity
(its recovery key printed once) and the next commands, written as they run here
(`scripts/squidd …` in a checkout, `squidd …` when installed). Log lines are silenced:
the output is the set-up's own.
"""

from __future__ import annotations

import os
import shlex
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from squidd.commands.init_ask import (
    Answers,
    ask,
    ask_api,
    ask_llm,
    ask_timezone,
    ask_until,
    yes,
)
from squidd.commands.init_channels import ask_email, ask_matrix
from squidd.commands.init_file import render, write
from squidd.commands.init_local import ask_local
from squidd.config.sections import default_data_dir
from squidd.errors import EXIT_FAILURE, EXIT_OK, ConfigError, SquiddError
from squidd.secrets import secret_value

__all__ = ["interactive_init", "next_commands"]

PARTS = ("the model", "Matrix", "email", "the API and dashboard", "the timezone", "the service")


def _silence_logs() -> None:
    from squidd.log import configure_logging

    configure_logging("critical", stream=open(os.devnull, "w"))  # noqa: SIM115 - for the run


def _first_run(answers: Answers) -> None:
    data_dir = ask("Data directory", str(default_data_dir()))
    answers.sections["storage"] = {"data_dir": str(Path(data_dir).expanduser())}
    ask_timezone(answers, None)
    _ask_model(answers, {}, None)
    if yes("\nSet up Matrix?"):
        ask_matrix(answers, {})
    if yes("\nSet up email?"):
        ask_email(answers, {})
    ask_api(answers, {})


def _model_choice(text: str) -> str | None:
    return None if text in ("1", "2") else "answer 1 or 2"


def _ask_model(answers: Answers, current: dict[str, Any], current_key: str | None) -> None:
    """A hosted endpoint (with a key) or a local model server (none): the one asked."""
    local = any(p.get("kind", "openai") != "openai" for p in current.get("providers", []))
    choice = ask_until(
        "\nThe model: 1 a hosted endpoint (OpenAI-compatible, with a key), 2 a local model "
        "server (Ollama, llama.cpp, vLLM)",
        "2" if local else "1",
        _model_choice,
    )
    if choice == "2":
        ask_local(answers, current)
    else:
        ask_llm(answers, current, current_key)


def _current_secrets(target: Path) -> tuple[str | None, str | None]:
    """The LLM key and the Matrix password the config has now, when it loads."""
    from squidd.config import load_settings

    try:
        settings = load_settings(target)
    except ConfigError:
        return None, None
    key, password = settings.llm.api_key, settings.matrix.password
    return secret_value(key) or None, secret_value(password) or None


def _rerun(target: Path, current: dict[str, Any], answers: Answers) -> str:
    """Which part the person changes, asked; its questions. The part's name."""
    print(f"{target} exists; which part would you like to change? (the rest stays as it is)")
    for number, part in enumerate(PARTS, 1):
        print(f"  {number}. {part}")
    choices = [str(n) for n in range(1, len(PARTS) + 1)]
    choice = ask_until("Part", "", lambda c: None if c in choices else "answer a number above")
    part = PARTS[int(choice) - 1]
    section: dict[str, Any] = {}
    if part == "the model":
        _ask_model(answers, current.get("llm", section), _current_secrets(target)[0])
    elif part == "Matrix":
        ask_matrix(answers, current.get("matrix", section), _current_secrets(target)[1])
    elif part == "email":
        ask_email(answers, current.get("email", section))
    elif part == "the API and dashboard":
        ask_api(answers, current.get("api", section))
    elif part == "the timezone":
        ask_timezone(answers, current.get("timezone"))
        _own_timezones(current)
    return part


def _own_timezones(current: dict[str, Any]) -> None:
    """Name the sections that keep a timezone of their own (written before the top-level one)."""
    from squidd.config import TIMEZONE_KEYS

    for section, key in TIMEZONE_KEYS:
        own = current.get(section, {}).get(key)
        if own is not None:
            print(f"  note: {section}.{key} = {own!r} stays; remove it to follow this timezone")


def _check(text: str, answers: Answers) -> None:
    """The config to write must load (its new secrets by value: their files come with it);
    a problem is a `ValidationError` naming its key. The file alone is checked: the
    environment's `SQUIDD_*` values are not part of what is written."""
    from squidd.config import Settings

    data = tomllib.loads(text)
    for credential, secret in answers.secrets.items():
        section, _, key = credential.partition("_")
        data[section].pop(f"{key}_file", None)
        data[section][key] = secret
    Settings(**data)


def interactive_init(target: Path, init_command: Callable[..., int], default: Path) -> int:
    """Ask, try, write `target`; `init_command` (commands/init.py) then writes the
    workspace and what the plain `init` writes beside the config. `default`: the config
    squidd reads without `--config` (the next commands name `target` when it is another)."""
    _silence_logs()
    answers = Answers()
    part = None
    try:
        existing = target.read_text(encoding="utf-8") if target.exists() else None
        current = tomllib.loads(existing) if existing is not None else {}
        if existing is None:
            print(f"squidd set-up: answers go to {target} (press Enter for the [default])")
            _first_run(answers)
        else:
            part = _rerun(target, current, answers)
        written: list[Path] = []
        if answers.sections or answers.secrets:
            text = render(existing, answers, target.parent)
            _check(text, answers)
            written = write(target, text, answers)
    except (KeyboardInterrupt, EOFError):
        print("\ninit: stopped; nothing was written", file=sys.stderr)
        return 130
    except ValidationError as exc:
        for error in exc.errors(include_input=False):
            where = ".".join(str(part) for part in error["loc"])
            print(f"init: {where}: {error['msg'].removeprefix('Value error, ')}", file=sys.stderr)
        print("nothing was written", file=sys.stderr)
        return EXIT_FAILURE
    except (ValueError, OSError, SquiddError) as exc:
        print(f"\ninit: {exc}\nnothing was written", file=sys.stderr)
        return EXIT_FAILURE
    for path in written:
        print(f"{'changed ' if path == target and existing else 'created '} {path}")
    init_command(target, next_steps=False, config_written=True)
    if "matrix" in answers.sections:
        _bootstrap_identity(target)
    print(next_commands(target, default, service=part == "the service"))
    return EXIT_OK


def _bootstrap_identity(target: Path) -> None:
    from squidd.config import load_settings
    from squidd.ops.matrix_identity import bootstrap, fingerprint

    settings = load_settings(target)
    print("\nsetting up the bot's cross-signing identity…")
    try:
        done = anyio.run(lambda: bootstrap(settings, reset=False, ask_password=lambda: None))
    except SquiddError as exc:
        print(f"matrix: {exc}\n  (run `{_command()} matrix bootstrap` later)")
        return
    print(f"master key: {fingerprint(done.master)}")
    if done.recovery_key is not None:
        print("recovery key (shown once; keep it safe, away from this machine):")
        print(f"  {done.recovery_key}")


def _checkout() -> Path | None:
    """The source checkout this squidd runs from, or None when it is installed."""
    import squidd

    root = Path(squidd.__file__).resolve().parents[2]
    ok = (root / "scripts" / "squidd").is_file() and (root / "pyproject.toml").is_file()
    return root if ok else None


def _command() -> str:
    root = _checkout()
    if root is None:
        return "squidd"
    script = root / "scripts" / "squidd"
    try:
        return shlex.quote(str(script.relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(script))


def next_commands(target: Path, default: Path, *, service: bool = False) -> str:
    """What to run next, each line as it runs from here; the dashboard and its key."""
    from squidd.config import load_settings

    settings = load_settings(target)
    flag = "" if target == default else f" --config {shlex.quote(str(target))}"
    cmd = _command() + flag
    lines = [
        "\nNext (each runs as printed):",
        f"  {cmd} doctor              check everything once more",
        f'  {cmd} chat -m "hello"     one message from this terminal',
        f"  {cmd} run                 the daemon, in the foreground",
    ]
    keys = settings.api.keys_path(settings.storage.data_dir)
    if settings.api.enabled:
        lines.append(f"Dashboard (while it runs): http://{settings.api.listen}/")
        lines.append(f"  log in with the key in {keys}")
    else:
        lines.append(f"Dashboard and API: off (`{_command()} init --interactive` turns them on)")
    root = _checkout()
    install = f"sudo {root / 'deploy' / 'install.sh'}" if root else "see docs/operations.md"
    prefix = "" if service else "As a service: "
    lines.append(
        f"{prefix}{install}, copy {target.name} and its credential files to /etc/squidd/,"
        "\n  then: sudo systemctl enable --now squidd"
    )
    return "\n".join(lines)
