"""The docs a newcomer reads stay true: every config key is in the reference (generated from
the settings model, and checked against config.example.toml), and every `squidd ...` command
shown in README.md and docs/ parses with the real CLI parser."""

from __future__ import annotations

import contextlib
import io
import re
import shlex

from squidd import cli
from tests.support.config_reference import REPO, TARGET, keys, render

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
EXAMPLE = REPO / "config.example.toml"
_SECTION = re.compile(r"^#?\s*\[\[?([a-z_][a-z0-9_.]*)\]\]?\s*$")
_ARRAY = re.compile(r"^#?\s*\[\[([a-z_][a-z0-9_.]*)\]\]\s*$")
# `key = value`, or commented out as `# key = value` (prose has no value after the `=`).
_KEY = re.compile(r"^#?\s?([a-z_][a-z0-9_]*) = (?:[\"'\[{]|-?\d|true\b|false\b)")
# A command line: `squidd ...` or `scripts/squidd ...` (after `$ ` or `sudo `), up to a comment,
# a pipe, a redirection or the end of the inline code.
_COMMAND = re.compile(r"^(?:\$ |sudo )?((?:scripts/)?squidd(?: [^|;&<>#]*)?)")
# Inline code that quotes what squidd prints, not a command.
_OUTPUT = {"squidd is not running"}


def test_the_reference_is_generated_from_the_settings() -> None:
    assert TARGET.read_text(encoding="utf-8") == render(), (
        "docs/config-reference.md is out of date: python -m tests.support.config_reference"
    )


def _example_keys() -> set[str]:
    """`section.key` of every key config.example.toml sets or shows commented out."""
    found: set[str] = set()
    section = ""
    for raw in EXAMPLE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if header := _SECTION.match(line):
            section = header.group(1) + ("[]" if _ARRAY.match(line) else "")
            continue
        if (key := _KEY.match(line)) and section:
            found.add(f"{section}.{key.group(1)}")
    return found


def test_every_key_of_the_example_is_a_real_documented_key() -> None:
    documented = {key for key, _, _ in keys()}
    text = TARGET.read_text(encoding="utf-8")
    assert all(f"`{key}`" in text for key in documented)
    sections = {key.rsplit(".", 1)[0] for key in documented}
    # A list of tables (`servers = [...]` under [mcp]) is documented by its keys.
    documented |= {section.removesuffix("[]") for section in sections if section.endswith("[]")}
    unknown = sorted(
        key
        for key in _example_keys()
        if key not in documented and key.rsplit(".", 1)[0] in sections
    )
    assert unknown == []


def _doc_commands() -> list[tuple[str, str]]:
    """(file, command line) of every `squidd ...` in code blocks and inline code."""
    found: list[tuple[str, str]] = []
    for path in DOCS:
        fence = False
        carried = ""
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                fence, carried = not fence, ""
                continue
            if fence:
                line = carried + line.strip()
                if line.endswith("\\"):
                    carried = line[:-1]
                    continue
                carried = ""
                pieces = [line]
            else:
                pieces = re.findall(r"`([^`]+)`", line)
            for piece in pieces:
                match = _COMMAND.match(piece.strip())
                if match and match.group(1).strip() not in _OUTPUT:
                    found.append((path.name, match.group(1).strip()))
    return found


def _parses(command: str) -> str | None:
    """None when the real parser accepts the command line, else why not."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"cannot split: {exc}"
    words = words[1:]  # the program name
    if not words:
        return None
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            cli._parser().parse_args(words)
    except SystemExit as exc:
        why = errors.getvalue()
        # An example may name a command and leave its arguments out (`squidd parked retry`).
        if exc.code == 0 or "arguments are required" in why:
            return None
        return why.strip().splitlines()[-1] if why.strip() else "the CLI refuses it"
    return None


def test_every_command_in_the_docs_exists() -> None:
    commands = _doc_commands()
    assert len(commands) > 20  # the scan found the examples
    wrong = [(name, cmd, why) for name, cmd in commands if (why := _parses(cmd)) is not None]
    assert wrong == []


def test_a_command_that_does_not_exist_is_caught() -> None:
    assert _parses("squidd frobnicate --now") is not None
    assert _parses("squidd doctor --no-such-flag") is not None
    assert _parses("squidd doctor --json") is None
