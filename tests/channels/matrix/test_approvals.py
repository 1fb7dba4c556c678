"""Approvals on Matrix, as a real `squidd run` against a real Synapse with the scripted LLM:
the prompt names the exact command; `/approve <id>` runs it once, a non-approver's
`/approve` changes nothing, `/deny <id>` never runs it, `/always <id>` runs it and the next
identical call without asking; the same with the reactions the bot offers on the prompt
(✅ once, ❌ never,
♾️ always, a non-approver's ✅ nothing). Every decision is one line of a verifiable audit
log."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from nio import ReactionEvent

from squidd.store.audit import AuditFile
from tests.servers.synapse.server import SynapseServer, User
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gateway import runs
from tests.support.matrix_daemon import MakePerson, MatrixSquidd, bot_matrix_section

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

COMMAND = "echo ran >> ran.txt"
SHELL = Reply(tool_calls=[("shell", {"command": COMMAND})])


def prompt_of(body: str) -> str:
    """The question id of an approval prompt for COMMAND."""
    found = re.match(r"Approval needed \(([0-9a-f]{8})\): Run shell: (.*)\?\n", body)
    assert found is not None and found.group(2) == COMMAND, body
    return found.group(1)


async def react(human: Any, room: str, event_id: str, key: str) -> str:
    relates = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
    return str(await human.send_event(room, "m.reaction", {"m.relates_to": relates}))


def config_for(
    tmp: Path, llm: FakeLLM, synapse: SynapseServer, bot: User, humans: list[str], room: str
) -> Path:
    return write_daemon_config(
        tmp,
        llm.base_url,
        api_key="sk-test-matrix-approvals-0001",
        gateway={"delivery_retry_initial_s": 0.2, "delivery_retry_max_s": 1.0},
        agents={"workspace": str(tmp / "ws")},
        matrix=bot_matrix_section(
            synapse, bot, humans, open_rooms=[room], sync_timeout_s=5, **synapse.bot_rate
        ),
        **{
            "tools.shell": {"enabled": True},
            "tools.policy": {"default_deny": []},
            "tools.approval": {"approvers": humans[:1], "timeout_s": 300},
        },
    )


class Group(NamedTuple):
    """Alice and Bob with the bot in a group room, a daemon whose shell asks Alice; the
    file each run of the command appends to."""

    alice: Any
    bob: Any
    room: str
    marker: Path
    daemon: DaemonProcess


@pytest.fixture
async def group(bot: User, make_human: MakePerson, matrix_squidd: MatrixSquidd) -> Group:
    alice = await make_human("alice")
    bob = await make_human("bob")
    room = await alice.create_room([bot.user_id, bob.user_id])
    await bob.join(room)
    tmp, llm = matrix_squidd.tmp, matrix_squidd.llm
    (tmp / "ws").mkdir()
    config = config_for(tmp, llm, matrix_squidd.synapse, bot, [alice.user_id, bob.user_id], room)
    llm.push(SHELL, "done 1", SHELL, "not run", SHELL, "done 3", SHELL, "done 4")
    daemon = await matrix_squidd.again(config, "squidd.log")
    return Group(alice, bob, room, tmp / "ws" / "ran.txt", daemon)


async def test_approve_deny_always_and_a_non_approver_on_synapse(
    bot: User, group: Group, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    alice, bob, room, marker, daemon = group

    async def ask(text: str) -> tuple[str, str]:
        """Send `text`; the approval prompt's question id, and the asked event."""
        asked = await alice.send(room, text)
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, asked), f"prompt for {text}")
        return prompt_of(alice.replies_to(bot.user_id, asked)[0].content["body"]), asked

    async def reply_after(asked: str, count: int) -> str:
        await alice.wait_for(
            lambda: len(alice.replies_to(bot.user_id, asked)) >= count, "the turn's reply"
        )
        return str(alice.replies_to(bot.user_id, asked)[count - 1].content["body"])

    question, asked = await ask("run it")
    await bob.send(room, f"/approve {question}")  # bob may talk, but not approve
    await alice.send(room, f"/approve {question}")
    assert await reply_after(asked, 2) == "done 1"
    assert runs(marker) == 1

    question, asked = await ask("run it again")
    await alice.send(room, f"/deny {question}")
    assert await reply_after(asked, 2) == "not run"
    assert runs(marker) == 1

    question, asked = await ask("run it, and from now on")
    await alice.send(room, f"/always {question}")
    assert await reply_after(asked, 2) == "done 3"
    later = await alice.send(room, "once more")
    assert await reply_after(later, 1) == "done 4"  # no question asked
    assert runs(marker) == 3
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


async def test_reactions_on_the_prompt_answer_it(
    bot: User, group: Group, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    alice, bob, room, marker, daemon = group

    async def turn(text: str, key: str, *, by_bob_first: bool = False) -> str:
        asked = await alice.send(room, text)
        await alice.wait_for(lambda: alice.replies_to(bot.user_id, asked), f"prompt: {text}")
        prompt = alice.replies_to(bot.user_id, asked)[0]
        prompt_of(prompt.content["body"])

        def offered() -> list[str]:
            return sorted(
                s.event.key
                for s in alice.events
                if isinstance(s.event, ReactionEvent)
                and s.event.sender == bot.user_id
                and s.event.reacts_to == prompt.event.event_id
            )

        await alice.wait_for(lambda: len(offered()) == 3, "the reactions offered")
        assert offered() == sorted(["✅", "♾️", "❌"])
        if by_bob_first:
            await react(bob, room, prompt.event.event_id, "✅")
        await react(alice, room, prompt.event.event_id, key)
        await alice.wait_for(lambda: len(alice.replies_to(bot.user_id, asked)) >= 2, "reply")
        return str(alice.replies_to(bot.user_id, asked)[1].content["body"])

    assert await turn("run it", "✅", by_bob_first=True) == "done 1"
    assert runs(marker) == 1
    assert await turn("again", "❌") == "not run"
    assert runs(marker) == 1
    assert await turn("from now on", "♾️") == "done 3"
    later = await alice.send(room, "once more")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, later), "reply without asking")
    assert alice.replies_to(bot.user_id, later)[0].content["body"] == "done 4"
    assert runs(marker) == 3
    assert await daemon.stop() == 0
    decisions = [r["decision"] for r in AuditFile(tmp_path / "data").records()]
    assert decisions == ["approved", "denied", "always", "always"]
    assert daemon.count("approval_answer_ignored") == 1
    assert len(fake_llm.chat_requests) == 8  # no reaction was ever a turn


@pytest.mark.parametrize(("answer", "reply", "ran"), [("yes", "done", 1), ("No.", "not run", 0)])
async def test_a_plain_yes_or_no_answers_in_a_direct_chat_with_the_default_quiet_window(
    synapse: SynapseServer,
    bot: User,
    make_human: Callable[..., Any],
    tmp_path: Path,
    fake_llm: FakeLLM,
    answer: str,
    reply: str,
    ran: int,
    matrix_squidd: MatrixSquidd,
) -> None:
    # `matrix.debounce_ms` at its default (1500) and answers streamed (a direct chat): the
    # reply "yes" is taken before the burst stage, which would hold it until the turn that
    # waits for it ends. The question's timeout is short enough to fail the test otherwise.
    alice = await make_human("alice")
    (tmp_path / "ws").mkdir()
    marker = tmp_path / "ws" / "ran.txt"
    config = write_daemon_config(
        tmp_path,
        fake_llm.base_url,
        api_key="sk-test-matrix-approvals-0002",
        agents={"workspace": str(tmp_path / "ws")},
        matrix=bot_matrix_section(
            synapse, bot, [alice.user_id], sync_timeout_s=5, streaming="edits"
        ),
        **{
            "tools.shell": {"enabled": True},
            "tools.policy": {"default_deny": []},
            "tools.approval": {"approvers": [alice.user_id], "timeout_s": 60},
        },
    )
    fake_llm.push(SHELL, reply)
    daemon = await matrix_squidd.again(config, "squidd.log")
    room = await alice.room_with(bot.user_id)
    asked = await alice.send(room, "run it")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, asked), "the prompt")
    prompt_of(alice.replies_to(bot.user_id, asked)[0].content["body"])
    await alice.send(room, answer)
    await alice.wait_for(lambda: len(alice.replies_to(bot.user_id, asked)) >= 2, "the reply")
    assert alice.replies_to(bot.user_id, asked)[1].content["body"] == reply
    assert runs(marker) == ran
    assert await daemon.stop() == 0
    assert len(fake_llm.chat_requests) == 2  # the answer was no turn of its own
    decision = "approved" if ran else "denied"
    assert [r["decision"] for r in AuditFile(tmp_path / "data").records()] == [decision]
    assert daemon.count("approval_answer_taken") == 1
