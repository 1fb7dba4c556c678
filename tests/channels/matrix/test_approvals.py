"""Approvals on Matrix, as a real `squidd run` against a real Synapse with the scripted LLM:
the prompt names the exact command; `/approve <id>` runs it once, a non-approver's
`/approve` changes nothing, `/deny <id>` never runs it, `/always <id>` runs it and the next
identical call without asking. Every decision is one line of a verifiable audit log."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squidd.store.audit import AuditFile
from tests.channels.matrix.conftest import start_squidd
from tests.servers.synapse.server import SynapseServer, User
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

COMMAND = "echo ran >> ran.txt"
SHELL = Reply(tool_calls=[("shell", {"command": COMMAND})])


def _config(
    tmp: Path, llm: FakeLLM, synapse: SynapseServer, bot: User, humans: list[str], room: str
) -> Path:
    return write_daemon_config(
        tmp,
        llm.base_url,
        api_key="sk-test-matrix-approvals-0001",
        gateway={"delivery_retry_initial_s": 0.2, "delivery_retry_max_s": 1.0},
        agents={"workspace": str(tmp / "ws")},
        matrix={
            "enabled": True,
            "homeserver": synapse.url,
            "user_id": bot.user_id,
            "password": bot.password,
            "allowed_users": humans,
            "open_rooms": [room],
            "sync_timeout_s": 5,
        },
        **{
            "tools.shell": {"enabled": True},
            "tools.policy": {"default_deny": []},
            "tools.approval": {"approvers": humans[:1], "timeout_s": 300},
        },
    )


async def test_approve_deny_always_and_a_non_approver_on_synapse(
    synapse: SynapseServer,
    bot: User,
    make_human: Callable[..., Any],
    tmp_path: Path,
    fake_llm: FakeLLM,
    squidds: list[DaemonProcess],
) -> None:
    alice = await make_human("alice")
    bob = await make_human("bob")
    room = await alice.create_room([bot.user_id, bob.user_id])
    await bob.join(room)
    (tmp_path / "ws").mkdir()
    marker = tmp_path / "ws" / "ran.txt"
    config = _config(tmp_path, fake_llm, synapse, bot, [alice.user_id, bob.user_id], room)
    fake_llm.push(SHELL, "done 1", SHELL, "not run", SHELL, "done 3", SHELL, "done 4")
    daemon = await start_squidd(squidds, config, tmp_path / "squidd.log")

    def runs() -> int:
        return len(marker.read_text().splitlines()) if marker.exists() else 0

    async def ask(text: str) -> tuple[str, str]:
        """Send `text`; the approval prompt's question id, and the asked event."""
        asked = await alice.send(room, text)
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, asked), f"prompt for {text}")
        body = alice.replies_to(bot.user_id, asked)[0].content["body"]
        found = re.match(r"Approval needed \(([0-9a-f]{8})\): Run shell: (.*)\?\n", body)
        assert found is not None and found.group(2) == COMMAND, body
        return found.group(1), asked

    async def reply_after(asked: str, count: int) -> str:
        await alice.wait_for(
            lambda: len(alice.replies_to(bot.user_id, asked)) >= count, "the turn's reply"
        )
        return str(alice.replies_to(bot.user_id, asked)[count - 1].content["body"])

    question, asked = await ask("run it")
    await bob.send(room, f"/approve {question}")  # bob may talk, but not approve
    await alice.send(room, f"/approve {question}")
    assert await reply_after(asked, 2) == "done 1"
    assert runs() == 1

    question, asked = await ask("run it again")
    await alice.send(room, f"/deny {question}")
    assert await reply_after(asked, 2) == "not run"
    assert runs() == 1

    question, asked = await ask("run it, and from now on")
    await alice.send(room, f"/always {question}")
    assert await reply_after(asked, 2) == "done 3"
    later = await alice.send(room, "once more")
    assert await reply_after(later, 1) == "done 4"  # no question asked
    assert runs() == 3
    assert await daemon.stop() == 0

    audit = AuditFile(tmp_path / "data")
    assert [(r["decision"], r["by"]) for r in audit.records()] == [
        ("approved", alice.user_id),
        ("denied", alice.user_id),
        ("always", alice.user_id),
        ("always", "always rule"),
    ]
    assert audit.verify()[0] == 4
    assert daemon.count("approval_answer_ignored") == 1
