"""Approval questions and `always` rules, attempt counts, handled ids and the
conversations file come back whole: arbitrary valid records (tests/support/records.py)
written through the real store into a fresh folder, read back by a new instance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
from hypothesis import given
from hypothesis import strategies as st

from squidd.core.approvals import AlwaysRule, Question, QuestionState
from squidd.store.approvals import QuestionFiles
from squidd.store.attempts import AttemptsDir
from squidd.store.conversations import ConversationsFile
from squidd.store.handled import HandledFile
from tests.support.records import EXAMPLES, always_rules, folder, ints, names, questions, texts


@EXAMPLES
@given(question=questions)
def test_an_approval_question_comes_back_whole(question: Question) -> None:
    with folder() as data:
        assert QuestionFiles(data).create_sync(question) == (question, True)
        assert QuestionFiles(data).get_sync(question.id) == question


@EXAMPLES
@given(rules=st.lists(always_rules, max_size=4))
def test_always_rules_come_back_whole(rules: list[AlwaysRule]) -> None:
    with folder() as data:
        for rule in rules:
            QuestionFiles(data).add_rule_sync(rule)
        again = QuestionFiles(data)
        for session in {rule.session for rule in rules}:
            mine = [rule for rule in rules if rule.session == session]
            assert again.rules_sync(session) == list(dict.fromkeys(mine))


@EXAMPLES
@given(counts=st.dictionaries(texts, st.tuples(ints, texts), max_size=4))
def test_attempt_counts_come_back_whole(counts: dict[str, tuple[int, str]]) -> None:
    async def main(data: Path) -> dict[str, tuple[int, str]]:
        for key, (count, reason) in counts.items():
            await AttemptsDir(data).set(key, count, reason)
        again = AttemptsDir(data)
        return {key: await again.get(key) for key in counts}

    with folder() as data:
        assert anyio.run(main, data) == counts


NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)


@EXAMPLES
@given(entries=st.dictionaries(st.tuples(names, texts), st.booleans(), max_size=5))
def test_handled_ids_come_back_whole(entries: dict[tuple[str, str], bool]) -> None:
    async def main(data: Path) -> dict[tuple[str, str], bool]:
        handled = HandledFile(data, clock=lambda: NOW)
        for (channel, source_id), failed in entries.items():
            await handled.add(channel, source_id, failed=failed)
        again = HandledFile(data, clock=lambda: NOW + timedelta(hours=1))
        kept = {}
        for channel, source_id in entries:
            assert await again.contains(channel, source_id)
            kept[channel, source_id] = await again.failed(channel, source_id)
        return kept

    with folder() as data:
        assert anyio.run(main, data) == entries


changes = st.lists(
    st.tuples(texts, st.none() | st.just("new") | texts.filter(bool)), min_size=1, max_size=6
)
"""Steps on conversations: `/new` ("new"), a model chosen (a name) or the choice undone."""


@EXAMPLES
@given(steps=changes)
def test_the_conversations_file_comes_back_whole(steps: list[tuple[str, str | None]]) -> None:
    async def main(data: Path) -> None:
        kept = ConversationsFile(data)
        for conversation, step in steps:
            if step == "new":
                await kept.new(conversation)
            else:
                await kept.set_model(conversation, step)
        again = ConversationsFile(data)
        for conversation, _ in steps:
            assert await again.generation(conversation) == await kept.generation(conversation)
            assert await again.model(conversation) == await kept.model(conversation)

    with folder() as data:
        anyio.run(main, data)


def test_files_written_before_the_codecs_load(tmp_path: Path) -> None:
    """conversations.json, an attempt count and handled lines as the version before wrote
    them."""
    (tmp_path / "conversations.json").write_text(
        '{"a@x": {"generation": 2, "model": "small"}, "!r:x": {"model": "big"}}'
    )
    (tmp_path / "gateway" / "attempts").mkdir(parents=True)
    (tmp_path / "gateway" / "attempts" / "k.json").write_text(
        '{"key": "email\\u0000<m1@x>", "count": 2, "reason": "ValueError: x"}'
    )
    (tmp_path / "gateway" / "handled.jsonl").write_text(
        '{"channel":"email","id":"<m1@x>","at":"2026-03-02T11:00:00+00:00"}\n'
        '{"channel":"email","id":"<m2@x>","at":"2026-03-02T11:00:00","failed":true}\n'
    )

    async def main() -> None:
        conversations = ConversationsFile(tmp_path)
        assert await conversations.session("a@x") == "a@x#2"
        assert await conversations.model("a@x") == "small"
        assert (await conversations.generation("!r:x"), await conversations.model("!r:x")) == (
            0,
            "big",
        )
        assert await AttemptsDir(tmp_path).get("email\0<m1@x>") == (2, "ValueError: x")
        handled = HandledFile(tmp_path, clock=lambda: NOW)
        assert await handled.contains("email", "<m1@x>")
        assert not await handled.failed("email", "<m1@x>")
        assert await handled.failed("email", "<m2@x>")

    anyio.run(main)


def test_a_question_and_rules_written_before_the_codecs_load(tmp_path: Path) -> None:
    folder = tmp_path / "approvals" / "questions"
    folder.mkdir(parents=True)
    (folder / "0a1b2c3d.json").write_text(
        '{"id": "0a1b2c3d", "session": "s", "channel": "matrix", "tool": "shell",'
        ' "arguments": "{\\"command\\": \\"ls\\"}", "args_sha256": "ab",'
        ' "asked_at": "2026-03-02T12:00:00+00:00", "deadline": "2026-03-02T12:05:00+00:00",'
        ' "state": "always", "by": "@alice:x"}\n'
    )
    (tmp_path / "approvals" / "always.json").write_text(
        '[{"session": "s", "tool": "shell", "args_sha256": null, "executable": "ls"}]\n'
    )
    files = QuestionFiles(tmp_path)
    assert files.get_sync("0a1b2c3d") == Question(
        "0a1b2c3d",
        "s",
        "matrix",
        "shell",
        '{"command": "ls"}',
        "ab",
        datetime(2026, 3, 2, 12, tzinfo=UTC),
        datetime(2026, 3, 2, 12, 5, tzinfo=UTC),
        QuestionState.ALWAYS,
        "@alice:x",
    )
    assert files.rules_sync("s") == [AlwaysRule("s", "shell", None, "ls")]
