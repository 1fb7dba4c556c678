"""History lines, turn journals and the audit log come back whole: arbitrary valid records
(tests/support/records.py) written through the real store into a fresh folder, read back
by a new instance, compared as whole objects."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from squidd.core.audit import AuditEntry
from squidd.core.journal import RecordedAnswer, Replay
from squidd.core.models import Attachment, HistoryWindow, Message, SessionId, ToolCall
from squidd.store import journal as journal_module
from squidd.store.audit import ENTRY, AuditFile, Head
from squidd.store.journal import JournalDir
from squidd.store.jsonl import JsonlStore
from tests.support.records import EXAMPLES, audit_entries, folder, messages, texts, tool_calls

AT = datetime(2026, 3, 2, 12, 0, 0, 123456, tzinfo=UTC)


@EXAMPLES
@given(history=st.lists(messages, max_size=6), session=texts)
def test_history_lines_come_back_whole(history: list[Message], session: str) -> None:
    async def main(data: Path) -> HistoryWindow:
        await JsonlStore(data).append_messages(SessionId(session), history)
        return await JsonlStore(data).load_window(SessionId(session))

    with folder() as data:
        assert anyio.run(main, data) == HistoryWindow(0, history)


@dataclass(frozen=True)
class Step:
    """One record a turn appends: an answer asking for calls, a call's start or result."""

    kind: str
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    call: ToolCall | None = None


steps = st.one_of(
    st.builds(Step, st.just("answer"), texts, st.lists(tool_calls, max_size=3).map(tuple)),
    st.builds(Step, st.just("start"), call=tool_calls),
    st.builds(Step, st.just("result"), texts, call=tool_calls),
)


@EXAMPLES
@given(turn=texts, session=texts, recorded=st.lists(steps, min_size=1, max_size=6))
def test_a_turn_journal_comes_back_whole(turn: str, session: str, recorded: list[Step]) -> None:
    expected = Replay(started_at=AT)
    for step in recorded:
        if step.kind == "answer":
            expected.answers.append(RecordedAnswer(step.text, step.calls, AT.isoformat()))
        elif step.kind == "start" and step.call is not None:
            expected.started.add(step.call.id)
        elif step.call is not None:
            expected.results[step.call.id] = step.text

    async def main(data: Path) -> Replay | None:
        journals = JournalDir(data)
        for step in recorded:
            if step.kind == "answer":
                await journals.answer(turn, session, step.text, step.calls)
            elif step.kind == "start" and step.call is not None:
                await journals.started(turn, step.call)
            elif step.call is not None:
                await journals.result(turn, step.call.id, step.text)
        return await JournalDir(data).load(turn)

    with folder() as data, pytest.MonkeyPatch.context() as patch:
        patch.setattr(journal_module, "utcnow", lambda: AT)
        assert anyio.run(main, data) == expected


@EXAMPLES
@given(entries=st.lists(audit_entries, min_size=1, max_size=4))
def test_audit_log_entries_come_back_whole(entries: list[AuditEntry]) -> None:
    async def main(data: Path) -> None:
        for entry in entries:
            await AuditFile(data).append(entry)

    with folder() as data:
        anyio.run(main, data)
        again = AuditFile(data)
        assert [ENTRY.load(record) for record in again.records()] == entries
        lines, last = again.verify()
        assert again.read_head() == Head(
            lines, last, (data / "audit" / "calls.jsonl").stat().st_size
        )
        assert lines == len(entries)


def test_history_lines_written_before_the_codecs_load(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    path = store.history_path("s")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '{"role":"user","content":"hi","ts":"2026-03-02T12:00:00+00:00","turn":"email:<m1@x>",'
        '"attachments":[{"kind":"image","name":"a.png","mime":"image/png","size":3}]}\n'
        '{"role":"assistant","content":null,"tool_calls":[{"id":"c1","name":"shell",'
        '"arguments":"{}"}]}\n'
        '{"role":"tool","content":"ok","tool_call_id":"c1","name":"shell"}\n'
    )
    window = anyio.run(store.load_window, SessionId("s"))
    assert window == HistoryWindow(
        0,
        [
            Message(
                "user",
                "hi",
                ts="2026-03-02T12:00:00+00:00",
                turn="email:<m1@x>",
                attachments=(Attachment("image", "a.png", "image/png", 3),),
            ),
            Message("assistant", None, tool_calls=(ToolCall("c1", "shell", "{}"),)),
            Message("tool", "ok", tool_call_id="c1", name="shell"),
        ],
    )
