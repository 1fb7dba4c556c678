"""`/approve`, `/always` and `/deny` are in the chat-command table, so `/help` lists each with
its help line; a well-formed answer is still taken before the queue (tests/gateway/
test_approval_answers.py), and one that comes the ordinary way (no id, an id no question here
has, approvals not in use) is answered plainly, never passed to the model."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from squidd.core.approvals import ApprovalRules, Approvals, Question
from squidd.core.models import Inbound, SessionId
from squidd.gateway.chat_commands import ChatCommands
from squidd.store.approvals import QuestionFiles
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

ANSWERS = ("approve", "always", "deny")


class _Host:
    def __init__(self, approvals: Approvals | None) -> None:
        self._approvals = approvals

    async def usage_today(self) -> Mapping[str, Any]:
        return {}

    def model_state(self) -> Mapping[str, Any]:
        return {}

    def approvals(self) -> Approvals | None:
        return self._approvals


def _inbound(text: str, session: str = "s1") -> Inbound:
    return Inbound("memory", "id-1", SessionId(session), "alice", text)


async def test_help_lists_the_three_answers_each_with_a_help_line() -> None:
    reply = await ChatCommands(_Host(None)).answer(_inbound("/help"))
    assert reply is not None
    lines = reply.splitlines()
    for name in ANSWERS:
        [line] = [line for line in lines if line.startswith(f"/{name} - ")]
        assert len(line) > len(f"/{name} - ") + 10, line


async def test_an_answer_naming_no_waiting_question_is_told_so(tmp_path: Path) -> None:
    approvals = Approvals(ApprovalRules(), QuestionFiles(tmp_path), {})
    commands = ChatCommands(_Host(approvals))
    for name in ANSWERS:
        reply = await commands.answer(_inbound(f"/{name} 0123abcd"))
        assert reply == "No approval question with id 0123abcd is waiting here."
        reply = await commands.answer(_inbound(f"/{name}"))
        assert reply is not None and reply.startswith(f"Say /{name} ID, with the 8-character id")
        reply = await commands.answer(_inbound(f"/{name} later please"))
        assert reply is not None and reply.startswith(f"Say /{name} ID")
    reply = await ChatCommands(_Host(None)).answer(_inbound("/approve 0123abcd"))
    assert reply == "Approvals are not in use here: no tool waits for an answer."


async def test_a_question_waiting_in_another_conversation_is_not_answered_from_here(
    tmp_path: Path,
) -> None:
    store = QuestionFiles(tmp_path)
    asked = datetime.now(UTC)
    question = Question(
        "0123abcd",
        "s2",
        "memory",
        "shell",
        '{"command": "ls"}',
        "0" * 64,
        asked,
        asked + timedelta(minutes=5),
    )
    await store.create(question)
    commands = ChatCommands(_Host(Approvals(ApprovalRules(), store, {})))
    reply = await commands.answer(_inbound("/approve 0123abcd", session="s1"))
    assert reply == "No approval question with id 0123abcd is waiting here."
    still = await store.get("0123abcd")
    assert still is not None and still.waiting
    reply = await commands.answer(_inbound("/deny 0123ABCD", session="s2"))
    assert reply == "0123abcd: denied"


async def test_the_daemon_answers_a_stray_approve_without_the_model(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings = make_settings(
        tmp_path / "data",
        fake_llm.base_url,
        tools={"shell": {"enabled": True}, "approval": {"approvers": ["alice"]}},
    )
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]):
        channel.inject("/approve", session="s1", sender="alice", source_id="m1")
        await channel.wait_for(1, what="acked")
        channel.inject("/deny that one", session="s1", sender="alice", source_id="m2")
        await channel.wait_for(2, what="acked")
    texts = [sent.text for sent in channel.sent]
    assert texts[0].startswith("Say /approve ID, with the 8-character id")
    assert texts[1].startswith("Say /deny ID, with the 8-character id")
    assert fake_llm.chat_requests == []
