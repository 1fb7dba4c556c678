"""A conversation as the dashboard shows it: its history read from the end, a page of
turns at a time (newest first), each tool call beside the audit lines it left.

A page reads the history file backwards in blocks, so the newest turns cost the same in a
session of ten messages or of a million; an older page costs what lies after it. A turn
is a person's message and what followed it (the model's tool calls, their results, the
reply), shown in the order it happened. A tool call is matched to its audit lines by
session, tool and the hash of its arguments (the hash an approval binds), so the page
shows who approved it, when, how long it ran. All file work runs in a worker thread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from squidd.core.audit import arguments_hash
from squidd.core.models import Message
from squidd.store.audit import AuditFile
from squidd.store.records import MESSAGE

BLOCK = 64 * 1024
TURNS_PER_PAGE = 10
RESULT_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Call:
    tool: str
    arguments: list[tuple[str, str]]  # each argument as (name, value as text)
    audit: list[dict[str, str]]


@dataclass(slots=True)
class Shown:
    role: str
    ts: str
    text: str
    calls: list[Call] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Page:
    turns: list[list[Shown]]  # newest turn first, each in the order it happened
    more: bool  # an older page exists


def lines_backwards(path: Path, block: int = BLOCK) -> Iterator[bytes]:
    """The file's complete lines, last first."""
    with path.open("rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        rest = b""
        while end > 0:
            start = max(0, end - block)
            handle.seek(start)
            chunk = handle.read(end - start) + rest
            end = start
            parts = chunk.split(b"\n")
            rest = parts[0]
            for line in reversed(parts[1:]):
                if line.strip():
                    yield line
        if rest.strip():
            yield rest


def arguments_of(raw: str) -> list[tuple[str, str]]:
    """A call's arguments as (name, value) pairs; text that is not an object is one value."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return [("", raw)]
    if not isinstance(value, dict):
        return [("", raw)]
    return [
        (str(k), v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
        for k, v in value.items()
    ]


def _turns(path: Path, page: int) -> tuple[list[list[Message]], bool]:
    """Turns `page * TURNS_PER_PAGE` .. on, newest first; and whether older ones exist."""
    turns: list[list[Message]] = []
    current: list[Message] = []
    skip = page * TURNS_PER_PAGE
    for raw in lines_backwards(path):
        if len(turns) == skip + TURNS_PER_PAGE:
            return turns[skip:], True
        try:
            message = MESSAGE.loads(raw.decode("utf-8", "replace"))
        except (ValueError, KeyError, TypeError):
            continue  # a torn line: the store skips it too
        current.insert(0, message)
        if message.role == "user":
            turns.append(current)
            current = []
    if current:
        turns.append(current)
    return turns[skip:], False


def _audit_index(data_dir: Path, session: str) -> dict[tuple[str, str], list[dict[str, str]]]:
    index: dict[tuple[str, str], list[dict[str, str]]] = {}
    for record in AuditFile(data_dir).records():
        if record.get("session") != session:
            continue
        key = (str(record.get("tool", "")), str(record.get("args_sha256", "")))
        line = {k: "" if record.get(k) is None else str(record.get(k)) for k in AUDIT_FIELDS}
        index.setdefault(key, []).append(line)
    return index


AUDIT_FIELDS = ("time", "decision", "by", "duration_ms", "result_chars", "error")


def _shown(message: Message, audit: dict[tuple[str, str], list[dict[str, str]]]) -> Shown:
    text = message.content or ""
    if message.role == "tool" and len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS] + f"… ({len(text):,} characters in all)"
    calls = [
        Call(
            call.name,
            arguments_of(call.arguments),
            audit.get((call.name, arguments_hash(call.name, call.arguments)), []),
        )
        for call in message.tool_calls
    ]
    return Shown(message.role, message.ts or "", text, calls)


def read_page(data_dir: Path, file: str, session: str, page: int) -> Page:
    try:
        turns, more = _turns(data_dir / "sessions" / f"{file}.jsonl", page)
    except OSError:
        return Page([], False)
    audit = _audit_index(data_dir, session) if any(m.tool_calls for t in turns for m in t) else {}
    return Page([[_shown(m, audit) for m in turn] for turn in turns], more)


async def history_page(data_dir: Path, file: str, session: str, page: int) -> Page:
    """A page of the conversation in `sessions/<file>.jsonl`, read off the event loop."""
    return await anyio.to_thread.run_sync(read_page, data_dir, file, session, page)
