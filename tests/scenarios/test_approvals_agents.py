"""Scenario m (tests/scenarios/README.md), approvals and agents: two agents on one bot
account, told apart by room; only "work" requires an approval for the shell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from squidd.store.audit import AuditFile
from tests.support.fake_llm import Reply
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, matrix_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.matrix]

LOGS = "echo ran >> ran.txt"
SHOPPING = "echo milk >> list.txt"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _answer(request: dict[str, Any]) -> Reply:
    """Each agent by its SOUL.md: work checks the logs, home keeps the shopping list; both
    with the shell, then a closing word naming the agent."""
    messages = request["messages"]
    who = "Work" if "I am Work." in messages[0]["content"] else "Home"
    if messages[-1]["role"] == "tool":
        return Reply(content=f"{who}: done.")
    said = str([m for m in messages if m["role"] == "user"][-1]["content"])
    if "logs" in said:
        return Reply(tool_calls=[("shell", {"command": LOGS})])
    if "shopping" in said:
        return Reply(tool_calls=[("shell", {"command": SHOPPING})])
    return Reply(content=f"{who}: {said}")


async def test_a_yes_to_works_question_while_talking_to_home(scene: MatrixScene) -> None:
    """Alice keeps two assistants on one bot: "work" in her work room, "home" (the default)
    in her home room; only work asks before it runs a shell command. She asks work to check
    the logs: work asks first. While the question waits she asks home, in the other room,
    to put milk on the shopping list: home does it at once, without a question, and
    answers. Then she says "yes" in the work room: the command runs once, in work's
    workspace, and work finishes. Her "yes" is no turn of either agent; home's list and
    answer are untouched; the audit log names the agent of each call."""
    scene.fake_llm.responder = _answer
    tmp = scene.tmp_path
    alice = await scene.make_human("alice")
    work_room = await alice.create_room([scene.bot.user_id], name="work")
    home_room = await alice.create_room([scene.bot.user_id], name="home")
    (tmp / "ws").mkdir()
    (tmp / "ws" / "SOUL.md").write_text("I am Home.")
    (tmp / "work-ws").mkdir()
    (tmp / "work-ws" / "SOUL.md").write_text("I am Work.")
    config = matrix_config(
        tmp,
        scene.fake_llm.base_url,
        scene.synapse,
        scene.bot,
        [alice.user_id],
        **{
            "tools.approval": {"tools": [], "approvers": [alice.user_id], "timeout_s": 600},
            "agents": {
                "list": [
                    {"name": "home"},
                    {
                        "name": "work",
                        "workspace": str(tmp / "work-ws"),
                        "rooms": [work_room],
                        "approvals": {"tools": ["shell"]},
                    },
                ]
            },
        },
    )
    daemon = await start_squidd(scene.squidds, config, tmp / "squidd.log")
    bot = scene.bot.user_id
    for room in (work_room, home_room):
        await alice.wait_for(lambda r=room: alice.membership(r, bot) == "join", "the bot joins")
    work, home = Chat(alice, bot, work_room), Chat(alice, bot, home_room)

    asked = await alice.send(work_room, "please check the logs")
    await alice.wait_for(lambda: bool(work.containing("Approval needed")), "work's question", 60)
    _, question = work.question(asked)
    assert _lines(tmp / "work-ws" / "ran.txt") == 0

    shopping = await alice.send(home_room, "put milk on the shopping list")
    assert await home.wait_reply(shopping) == "Home: done."
    assert _lines(tmp / "ws" / "list.txt") == 1 and not home.containing("Approval needed")
    assert _lines(tmp / "work-ws" / "ran.txt") == 0  # work still waits for her

    said = await alice.send(work_room, "yes")
    await work.wait_text("Work: done.")
    await alice.wait_for(lambda: work.marks(said) == {"✅"}, "✅ on her yes", 60)
    thanks = await alice.send(home_room, "thanks")
    assert await home.wait_reply(thanks) == "Home: thanks"
    assert await daemon.stop() == 0

    assert _lines(tmp / "work-ws" / "ran.txt") == 1  # once, in work's workspace
    assert not (tmp / "ws" / "ran.txt").exists() and not (tmp / "work-ws" / "list.txt").exists()
    assert _lines(tmp / "ws" / "list.txt") == 1
    [prompt] = work.containing("Approval needed")
    assert f"({question}): Run shell: {LOGS}?" in prompt
    assert home.texts() == ["Home: done.", "Home: thanks"]
    asked_models = [
        str([m for m in r["messages"] if m["role"] == "user"][-1]["content"])
        for r in scene.fake_llm.chat_requests
    ]
    assert "yes" not in asked_models  # her answer was taken, never a turn
    calls = [
        (r.get("agent"), r["tool"], r["decision"], r.get("by"))
        for r in AuditFile(tmp / "data").records()
    ]
    assert sorted(calls, key=str) == sorted(
        [("home", "shell", "allowed", None), ("work", "shell", "approved", alice.user_id)],
        key=str,
    )
