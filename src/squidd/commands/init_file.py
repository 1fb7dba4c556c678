"""Writing the answers of `squidd init --interactive` into the config, keeping what is there.

The file is edited, not rewritten: a key the answers name is set in place (its comment
stays), a missing section is added at the end, everything else is left as it was, comments
included (tomlkit keeps a TOML file's formatting). Secrets go into credential files (0600)
beside the config, which names them by path (`password_file`), and an inline secret of the
same key is dropped. Every file is written in a temporary folder beside its place and
renamed in at the end, so Ctrl-C leaves nothing half-written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Table

from squidd.commands.init_ask import Answers
from squidd.fs import FILE_MODE, make_private_dir

__all__ = ["render", "write"]

HEADER = "Written by `squidd init --interactive`; secrets are in the *_file paths."


def render(existing: str | None, answers: Answers, credentials: Path) -> str:
    """The config text: `existing` with the answers set in it (or a new file)."""
    if existing is None:
        doc = tomlkit.document()
        doc.add(tomlkit.comment(HEADER))
        doc.add(tomlkit.nl())
    else:
        doc = tomlkit.parse(existing)
    for key, value in answers.sections.get("", {}).items():
        doc[key] = value
    for name, keys in answers.removed.items():
        table = doc.get(name)
        if isinstance(table, Table):
            for key in keys:
                table.pop(key, None)
    for name, values in answers.sections.items():
        if name:
            _set(doc, name, values)
    for credential in answers.secrets:
        section, _, key = credential.partition("_")
        table = doc.get(section)
        if isinstance(table, Table) and key in table:
            del table[key]  # `key` and `key_file` together are refused
        _set(doc, section, {f"{key}_file": str(credentials / credential)})
    return tomlkit.dumps(doc)


def _set(doc: tomlkit.TOMLDocument, name: str, values: dict[str, Any]) -> None:
    table = doc.get(name)
    if not isinstance(table, Table):
        table = tomlkit.table()
        doc[name] = table
    for key, value in values.items():
        table[key] = value


def write(target: Path, text: str, answers: Answers) -> list[Path]:
    """The secrets, then the config, each whole; the paths written."""
    make_private_dir(target.parent)
    staging = Path(tempfile.mkdtemp(prefix=".squidd-init-", dir=target.parent))
    written: list[Path] = []
    try:
        moves = [
            (_stage(staging, name, secret + "\n"), target.parent / name)
            for name, secret in answers.secrets.items()
        ]
        moves.append((_stage(staging, "config.toml", text), target))
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
