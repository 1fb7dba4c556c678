"""Approvals in the running daemon, on a channel: the prompt names the exact command and its
id; the answer is a message of its own, taken before the session's queue (where the waiting
turn holds the place), and so is `/approvals` while a question waits; `/approve <id>` runs
the command once, a second answer and a non-approver's answer change nothing, a reply "no"
denies, `/always <id>` runs it and the next identical call without asking; `/approvals`
lists and revokes."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.commands.status import approval_lines
from squidd.store.audit import AuditFile
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import (
    RAN_COMMAND,
    question_id,
    running_daemon,
    runs,
    shell_approval_settings,
)
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

OWNER = "alice"


async def test_approve_by_command_once_and_a_reply_no_denies(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings, marker = shell_approval_settings(
        tmp_path, fake_llm.base_url, approvers=[OWNER], timeout_s=300
    )
    shell = Reply(tool_calls=[("shell", {"command": RAN_COMMAND})])
    fake_llm.push(shell, "done once", shell, "not done")
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]):
        channel.inject("run it", sender=OWNER, source_id="m1")
        await channel.wait_for(1)
        question = question_id(channel.sent[0].text, RAN_COMMAND)
        waiting = approval_lines(settings)
        assert waiting[0] == "approvals waiting: 1" and waiting[1].startswith(f"  {question}  ")
        channel.inject(f"/approve {question}", sender="mallory", source_id="m2")
        await channel.wait_for(1, what="acked")
        assert runs(marker) == 0 and len(channel.sent) == 1
        channel.inject(f"/approve {question}", sender=OWNER, source_id="m3")
        await channel.wait_for(2)
        channel.inject(f"/deny {question}", sender=OWNER, source_id="m4")
        await channel.wait_for(4, what="acked")
        assert channel.sent[1].text == "done once" and runs(marker) == 1

        channel.inject("again", sender=OWNER, source_id="m5")
        await channel.wait_for(3)
        question_id(channel.sent[2].text, RAN_COMMAND)
        # `/approvals` is answered while the question waits (not queued behind the turn).
        channel.inject("/approvals", sender=OWNER, source_id="m5b")
        await channel.wait_for(4)
        assert "Waiting for an answer: 1" in channel.sent[3].text
        assert f"Run shell: {RAN_COMMAND}?" in channel.sent[3].text
        channel.inject("No.", sender=OWNER, source_id="m6")
        await channel.wait_for(5)
        assert channel.sent[4].text == "not done" and runs(marker) == 1
        assert approval_lines(settings) == ["approvals waiting: 0"]
    results = [m["content"] for m in fake_llm.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert results[-1] == f"Error: not run: {OWNER} denied it"
    records = AuditFile(settings.storage.data_dir).records()
    decisions = [(r["decision"], r["by"]) for r in records]
    assert decisions == [("approved", OWNER), ("denied", OWNER)]


async def test_always_runs_now_and_the_next_identical_call_without_asking(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings, marker = shell_approval_settings(
        tmp_path, fake_llm.base_url, approvers=[OWNER], timeout_s=300
    )
    shell = Reply(tool_calls=[("shell", {"command": RAN_COMMAND})])
    fake_llm.push(shell, "first", shell, "second")
    channel = MemoryChannel("memory")
    async with running_daemon(settings, [channel]):
        channel.inject("run it", sender=OWNER, source_id="m1")
        await channel.wait_for(1)
        question = question_id(channel.sent[0].text, RAN_COMMAND)
        channel.inject(f"/always {question}", sender=OWNER, source_id="m2")
        await channel.wait_for(2)
        channel.inject("run it again", sender=OWNER, source_id="m3")
        await channel.wait_for(3)
        assert [s.text for s in channel.sent[1:]] == ["first", "second"] and runs(marker) == 2
        channel.inject("/approvals", sender=OWNER, source_id="m4")
        await channel.wait_for(4)
        assert "Waiting for an answer: 0" in channel.sent[3].text
        assert "1. shell: command echo" in channel.sent[3].text
        channel.inject("/approvals revoke 1", sender=OWNER, source_id="m5")
        await channel.wait_for(5)
        assert channel.sent[4].text == "Revoked: shell: command echo"
