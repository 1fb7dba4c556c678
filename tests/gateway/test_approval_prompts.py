"""Approval prompts delivered like replies, in the running daemon: a prompt whose sends fail
a few times (a passing failure) goes out with the router's retries and her answer counts; a
prompt the channel refuses for good is parked (`squidd parked list` shows it, with the
prompt kept) and the call is denied, the model told why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from squidd.commands.parked import parked_command
from squidd.store.parked import ParkedDir
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import (
    RAN_COMMAND,
    running_daemon,
    runs,
    shell_approval_settings,
)
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

OWNER = "alice"
SHELL = Reply(tool_calls=[("shell", {"command": RAN_COMMAND})])


async def test_a_prompt_whose_sends_fail_goes_out_with_retries_and_the_answer_counts(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    settings, marker = shell_approval_settings(
        tmp_path, fake_llm.base_url, approvers=[OWNER], timeout_s=300
    )
    fake_llm.push(SHELL, "done")
    channel = MemoryChannel("memory", fail_sends=3)  # the first three sends: the prompt's
    async with running_daemon(settings, [channel]):
        channel.inject("run it", sender=OWNER, source_id="m1")
        await channel.wait_for(1)
        found = re.search(r"Approval needed \(([0-9a-f]{8})\)", channel.sent[0].text)
        assert found is not None, channel.sent[0].text
        channel.inject(f"/approve {found.group(1)}", sender=OWNER, source_id="m2")
        await channel.wait_for(2)
        await channel.wait_for(2, what="acked")
    assert [s.text for s in channel.sent][1:] == ["done"]
    assert runs(marker) == 1
    assert ParkedDir(settings.storage.data_dir).list_sync() == []


async def test_a_prompt_refused_for_good_is_parked_and_the_call_denied(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, marker = shell_approval_settings(
        tmp_path, fake_llm.base_url, approvers=[OWNER], timeout_s=300
    )
    fake_llm.push(SHELL, "could not ask")
    channel = MemoryChannel("memory", refused={OWNER})  # the target: the sender
    async with running_daemon(settings, [channel]):
        channel.inject("run it", session="s1", sender=OWNER, source_id="m1")
        await channel.wait_for(1, what="acked")  # its reply refused too: settled all the same
    assert runs(marker) == 0 and channel.sent == []
    [item] = ParkedDir(settings.storage.data_dir).list_sync()
    assert item.loop == "approval" and item.reply is not None
    assert item.reply.text.startswith("Approval needed (")
    assert not item.retryable  # the question it asked is denied: nothing to send again
    assert parked_command(settings, "list") == 0
    listed = capsys.readouterr().out
    assert item.id in listed and "approval prompt not delivered" in listed
    tool = [m for m in fake_llm.chat_requests[-1]["messages"] if m["role"] == "tool"]
    assert "its approval prompt could not be delivered" in tool[0]["content"]


async def test_a_prompt_left_for_a_question_decided_while_down_is_dropped_at_start(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # A crash left a prompt unsent; its question timed out while the daemon was down, so
    # no resumed turn will send it: it goes at the next start, not counted in the outbox
    # for ever. A prompt whose question still waits, and a reply, stay.
    from squidd.core.models import PendingReply, SessionId
    from squidd.core.prompts import drop_decided, record_of
    from squidd.store.outbox import OutboxDir

    settings, _ = shell_approval_settings(
        tmp_path, fake_llm.base_url, approvers=[OWNER], timeout_s=300
    )
    outbox = OutboxDir(settings.storage.data_dir)
    prompt = PendingReply("memory", "alice", "Approval needed ...", SessionId("memory:alice"))
    await outbox.put("memory", record_of("aaaaaaaa"), prompt)
    await outbox.put("memory", record_of("bbbbbbbb"), prompt)
    await outbox.put("memory", "m7", PendingReply("memory", "alice", "a reply", SessionId("s")))
    assert sorted(await outbox.sources()) == [
        ("memory", "approval:aaaaaaaa"),
        ("memory", "approval:bbbbbbbb"),
        ("memory", "m7"),
    ]
    assert await drop_decided(await outbox.sources(), {"bbbbbbbb"}, outbox) == 1
    assert sorted(r for _, r in await outbox.sources()) == ["approval:bbbbbbbb", "m7"]

    async with running_daemon(settings, [MemoryChannel("memory")]) as daemon:
        snapshot = await daemon.snapshot()  # no question waits: the other prompt goes too
    assert [r for _, r in await OutboxDir(settings.storage.data_dir).sources()] == ["m7"]
    assert snapshot["outbox"] == 1
