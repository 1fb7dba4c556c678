"""Approval questions and `always` rules on disk (the `QuestionStore` of core/approvals.py).

`<data dir>/approvals/questions/<id>.json` holds one question each, replaced whole (atomic
write, fsync'd); `<data dir>/approvals/always.json` the rules granted with ♾️, per session.
Every change happens under an exclusive lock on `<data dir>/approvals/.lock`, so the daemon
and a `squidd chat` sharing the data dir decide a question once: `decide` writes only a
waiting question, and a second answer finds it decided.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.core.approvals import AlwaysRule, Question, QuestionState
from squidd.errors import StorageError
from squidd.fs import (
    atomic_write_text,
    lock_file,
    make_private_dir,
    read_text_or_empty,
)
from squidd.store.records import Codec

log = structlog.get_logger()

__all__ = ["QuestionFiles"]

_ID = re.compile(r"[0-9a-f]{8}")


QUESTION: Codec[Question] = Codec(Question)
"""One question's file."""

RULE: Codec[AlwaysRule] = Codec(AlwaysRule)
"""One entry of always.json."""


def _rule(entry: dict[str, Any]) -> AlwaysRule | None:
    try:
        return RULE.load(entry)
    except ValueError:
        log.warning("approval_rule_unreadable")
        return None


class QuestionFiles:
    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir / "approvals"
        self._questions = self.dir / "questions"
        self._rules = self.dir / "always.json"

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        try:
            make_private_dir(self._questions)
        except OSError as exc:
            raise StorageError(f"cannot open the approvals: {exc.strerror or exc}") from exc
        with lock_file(self.dir / ".lock", "the approvals"):
            yield

    def _path(self, question_id: str) -> Path | None:
        return self._questions / f"{question_id}.json" if _ID.fullmatch(question_id) else None

    def _read(self, question_id: str) -> Question | None:
        path = self._path(question_id)
        if path is None:
            return None
        text = read_text_or_empty(path)
        if not text:
            return None
        try:
            return QUESTION.loads(text)
        except (ValueError, KeyError, TypeError):
            log.warning("approval_question_unreadable", question=question_id)
            return None

    def _write(self, question: Question) -> None:
        path = self._path(question.id)
        if path is None:
            raise StorageError(f"not a question id: {question.id!r}")
        atomic_write_text(path, QUESTION.dumps(question) + "\n")

    def create_sync(self, question: Question) -> tuple[Question, bool]:
        with self._lock():
            kept = self._read(question.id)
            if kept is not None:
                return kept, False
            self._write(question)
            return question, True

    def get_sync(self, question_id: str) -> Question | None:
        return self._read(question_id)

    def decide_sync(self, question_id: str, state: QuestionState, by: str) -> Question | None:
        with self._lock():
            kept = self._read(question_id)
            if kept is None or not kept.waiting:
                return None
            decided = replace(kept, state=state, by=by)
            self._write(decided)
            return decided

    def questions_sync(self) -> list[Question]:
        """Every question kept, waiting or decided, oldest first."""
        found: list[Question] = []
        if not self._questions.is_dir():
            return found
        for path in sorted(self._questions.glob("*.json")):
            question = self._read(path.stem)
            if question is not None:
                found.append(question)
        return sorted(found, key=lambda q: q.asked_at)

    def waiting_sync(self) -> list[Question]:
        return [question for question in self.questions_sync() if question.waiting]

    def _all_rules(self) -> list[dict[str, Any]]:
        text = read_text_or_empty(self._rules)
        try:
            value = json.loads(text) if text else []
        except json.JSONDecodeError:
            log.warning("approval_rules_unreadable")
            return []
        return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []

    def rules_sync(self, session: str) -> list[AlwaysRule]:
        mine = [_rule(r) for r in self._all_rules() if r.get("session") == session]
        return [rule for rule in mine if rule is not None]

    def add_rule_sync(self, rule: AlwaysRule) -> None:
        with self._lock():
            rules = self._all_rules()
            entry = RULE.dump(rule)
            if entry not in rules:
                rules.append(entry)
                atomic_write_text(self._rules, json.dumps(rules) + "\n")

    def remove_rule_sync(self, session: str, index: int) -> AlwaysRule | None:
        with self._lock():
            rules = self._all_rules()
            mine = [i for i, r in enumerate(rules) if r.get("session") == session]
            if not 1 <= index <= len(mine):
                return None
            removed = rules.pop(mine[index - 1])
            atomic_write_text(self._rules, json.dumps(rules) + "\n")
            return _rule(removed)

    async def create(self, question: Question) -> tuple[Question, bool]:
        return await anyio.to_thread.run_sync(self.create_sync, question)

    async def get(self, question_id: str) -> Question | None:
        return await anyio.to_thread.run_sync(self.get_sync, question_id)

    async def decide(self, question_id: str, state: QuestionState, by: str) -> Question | None:
        return await anyio.to_thread.run_sync(self.decide_sync, question_id, state, by)

    async def waiting(self) -> list[Question]:
        return await anyio.to_thread.run_sync(self.waiting_sync)

    async def rules(self, session: str) -> list[AlwaysRule]:
        return await anyio.to_thread.run_sync(self.rules_sync, session)

    async def add_rule(self, rule: AlwaysRule) -> None:
        await anyio.to_thread.run_sync(self.add_rule_sync, rule)

    async def remove_rule(self, session: str, index: int) -> AlwaysRule | None:
        return await anyio.to_thread.run_sync(self.remove_rule_sync, session, index)
