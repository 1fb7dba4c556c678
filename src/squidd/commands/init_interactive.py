"""`squidd init --interactive`: ask, try, then write — a config that works on the first start.

The questions (each with a default in brackets) cover the LLM endpoint, model and key, then
Matrix and email if wanted. Every answer is tried before anything is written: one
one-token LLM request, a Matrix password login (logged out again), an IMAP login with the
folder selected and an SMTP login, no mail sent. One refusal ends the run naming what was
refused, with nothing written. Then the secrets go into credential files (0600) next to the
config, which names them by path (never a secret in the config itself); every file is
written in a temporary folder beside its place and renamed in at the end, so Ctrl-C leaves
nothing half-written. Last, the Matrix identity is set up with `squidd matrix bootstrap`'s
code and its recovery key printed once, and the next commands are listed.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import anyio
from pydantic import ValidationError

from squidd.config.sections import default_data_dir
from squidd.errors import EXIT_FAILURE, EXIT_OK, SquiddError
from squidd.fs import FILE_MODE, make_private_dir
from squidd.ops.doctor.trials import Refused, try_settings

__all__ = ["interactive_init"]

Sections = dict[str, dict[str, Any]]


@dataclass
class Answers:
    """What the person said: the config's sections and the secrets, by credential name."""

    sections: Sections = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)


def _ask(question: str, default: str = "") -> str:
    shown = f" [{default}]" if default else ""
    answer = input(f"{question}{shown}: ").strip()
    return answer or default


def _ask_secret(question: str) -> str:
    return getpass.getpass(f"{question} (not shown): ").strip()


def _yes(question: str, default: bool = False) -> bool:
    answer = _ask(question + (" (Y/n)" if default else " (y/N)"), "").lower()
    return default if not answer else answer.startswith("y")


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.replace(";", ",").split(",") if part.strip()]


def _ask_llm(answers: Answers) -> None:
    print("\nThe model (any OpenAI-compatible endpoint)")
    url = _ask("LLM endpoint", "https://api.openai.com/v1")
    model = _ask("Model", "gpt-4o-mini")
    key = _ask_secret("API key (empty: none)")
    answers.sections["llm"] = {"base_url": url, "model": model}
    if key:
        answers.secrets["llm_api_key"] = key


def _ask_matrix(answers: Answers) -> None:
    if not _yes("\nSet up Matrix?"):
        return
    homeserver = _ask("Homeserver URL", "https://matrix.org")
    host = urlparse(homeserver).hostname or "example.org"
    user = _ask("The bot's Matrix id", f"@squidd:{host}")
    password = _ask_secret(f"Password of {user}")
    allowed = _names(_ask("Who may talk to it (Matrix ids, comma-separated)", ""))
    answers.sections["matrix"] = {
        "enabled": True,
        "homeserver": homeserver,
        "user_id": user,
        "allowed_users": allowed,
    }
    answers.secrets["matrix_password"] = password


def _ask_email(answers: Answers) -> None:
    if not _yes("\nSet up email?"):
        return
    address = _ask("The bot's address", "")
    domain = address.rpartition("@")[2] or "example.org"
    imap_host = _ask("IMAP server", f"imap.{domain}")
    imap_port = int(_ask("IMAP port", "993"))
    imap_security = _ask("IMAP security (tls, starttls, none)", "tls")
    username = _ask("Login name", address)
    password = _ask_secret(f"Password of {username}")
    smtp_host = _ask("SMTP server", f"smtp.{domain}")
    smtp_port = int(_ask("SMTP port", "465"))
    smtp_security = _ask("SMTP security (tls, starttls, none)", "tls")
    ca_file = _ask("Extra CA certificate for a self-hosted server (empty: none)", "")
    allowed = _names(_ask("Who may write to it (addresses, comma-separated)", ""))
    authserv = _ask("Your receiving server's authserv-id (Authentication-Results)", imap_host)
    section: dict[str, Any] = {
        "enabled": True,
        "address": address,
        "username": username,
        "imap_host": imap_host,
        "imap_port": imap_port,
        "imap_security": imap_security,
        "smtp_host": smtp_host,
        "smtp_port": smtp_port,
        "smtp_security": smtp_security,
        "allowed_senders": allowed,
        "trusted_authserv_id": authserv,
    }
    if ca_file:
        section["ca_file"] = str(Path(ca_file).expanduser().resolve())
    answers.sections["email"] = section
    answers.secrets["email_password"] = password


def _settings(answers: Answers) -> Any:
    """The Settings the written config will load (secrets by value, nothing read)."""
    from squidd.config import Settings

    values: dict[str, Any] = {k: dict(v) for k, v in answers.sections.items()}
    for name, secret in answers.secrets.items():
        section, _, key = name.partition("_")
        values[section][key] = secret
    return Settings(**values)


def _toml(sections: Sections) -> str:
    lines = ["# Written by `squidd init --interactive`; secrets are in the *_file paths.", ""]
    for name, values in sections.items():
        lines.append(f"[{name}]")
        # A JSON string, number, boolean or array of strings is the same value in TOML.
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in values.items())
        lines.append("")
    return "\n".join(lines)


def _write(target: Path, answers: Answers) -> list[Path]:
    """The secrets, then the config, each whole: written in a temporary folder beside
    them and renamed in. Nothing is left behind if this is interrupted before the end."""
    make_private_dir(target.parent)
    staging = Path(tempfile.mkdtemp(prefix=".squidd-init-", dir=target.parent))
    written: list[Path] = []
    try:
        sections = {k: dict(v) for k, v in answers.sections.items()}
        moves: list[tuple[Path, Path]] = []
        for name, secret in answers.secrets.items():
            section, _, key = name.partition("_")
            final = target.parent / name
            sections[section][f"{key}_file"] = str(final)
            moves.append((_stage(staging, name, secret + "\n"), final))
        moves.append((_stage(staging, "config.toml", _toml(sections)), target))
        for staged, final in moves:
            os.replace(staged, final)
            written.append(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written


def _stage(staging: Path, name: str, text: str) -> Path:
    path = staging / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def _bootstrap_identity(target: Path) -> None:
    from squidd.config import load_settings
    from squidd.ops.matrix_identity import bootstrap, fingerprint

    settings = load_settings(target)
    print("\nsetting up the bot's cross-signing identity…")
    try:
        done = anyio.run(lambda: bootstrap(settings, reset=False, ask_password=lambda: None))
    except SquiddError as exc:
        print(f"matrix: {exc}\n  (run `squidd --config {target} matrix bootstrap` later)")
        return
    print(f"master key: {fingerprint(done.master)}")
    if done.recovery_key is not None:
        print("recovery key (shown once; keep it safe, away from this machine):")
        print(f"  {done.recovery_key}")


def _next_steps(target: Path) -> None:
    flag = f"--config {target}"
    print(
        "\nNext:\n"
        f"  squidd {flag} doctor        check everything once more\n"
        f"  squidd {flag} chat          talk to it from this terminal\n"
        f"  squidd {flag} run           run the daemon in the foreground\n"
        "  as a service: sudo deploy/install.sh, copy this config and its credential files\n"
        "  to /etc/squidd/, then: sudo systemctl enable --now squidd"
    )


def interactive_init(target: Path, init_command: Callable[..., int]) -> int:
    """Ask, try, write `target`; `init_command` (commands/init.py) then writes the
    workspace and what the plain `init` writes beside the config."""
    if target.exists():
        print(f"init: {target} exists; edit it, or choose another --config", file=sys.stderr)
        return EXIT_FAILURE
    answers = Answers()
    try:
        print(f"squidd set-up: answers go to {target} (press Enter for the [default])")
        data_dir = _ask("Data directory", str(default_data_dir()))
        answers.sections["storage"] = {"data_dir": str(Path(data_dir).expanduser())}
        _ask_llm(answers)
        _ask_matrix(answers)
        _ask_email(answers)
        settings = _settings(answers)
        anyio.run(try_settings, settings, print)
        written = _write(target, answers)
    except Refused as exc:
        print(f"\ninit: refused: {exc}\nnothing was written", file=sys.stderr)
        return EXIT_FAILURE
    except (KeyboardInterrupt, EOFError):
        print("\ninit: stopped; nothing was written", file=sys.stderr)
        return 130
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            print(f"init: {where}: {error['msg']}", file=sys.stderr)
        print("nothing was written", file=sys.stderr)
        return EXIT_FAILURE
    except (ValueError, SquiddError) as exc:
        print(f"\ninit: {exc}\nnothing was written", file=sys.stderr)
        return EXIT_FAILURE
    for path in written:
        print(f"created  {path}")
    init_command(target, next_steps=False)
    if "matrix" in answers.sections:
        _bootstrap_identity(target)
    _next_steps(target)
    return EXIT_OK
