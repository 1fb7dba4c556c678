"""A reminder asked for in a Matrix chat, kept by cron across a restart of the daemon."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from squidd.store.cron_jobs import JobsFile
from tests.support.fake_llm import Reply
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, matrix_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

# A zone far from UTC, with a quarter-hour offset: a time read in the wrong zone is hours off.
ZONE = "Pacific/Chatham"
# How far ahead Alice names the time: long enough for her message to become a job (the
# debounce, one turn) and to restart the daemon; if the restart takes longer on a loaded
# machine, the reminder comes as the daemon is back (`cron.misfire_grace_s`), still once.
LEAD_S = 10


def user_text(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m.get("role") == "user"]
    return str(users[-1]["content"]) if users else ""


async def test_a_reminder_comes_at_the_local_time_once_across_a_restart(
    scene: MatrixScene,
) -> None:
    """Alice lives on the Chatham Islands; the bot's `cron.default_timezone` says so. In her
    chat with the bot she writes "remind me at <a few seconds from now, her time> to water
    the plants"; the bot puts that in its schedule and says so. Its owner restarts the daemon
    before the time comes. At her local time, not before, the reminder arrives in the same
    chat — once — and afterwards the bot answers her as usual."""
    alice = await scene.make_human("alice")
    config = matrix_config(
        scene.tmp_path,
        scene.fake_llm.base_url,
        scene.synapse,
        scene.bot,
        [alice.user_id],
        cron={"default_timezone": ZONE},
    )
    first = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd-1.log")
    room = await alice.room_with(scene.bot.user_id)
    chat = Chat(alice, scene.bot.user_id, room)
    due = (datetime.now(ZoneInfo(ZONE)) + timedelta(seconds=LEAD_S)).replace(microsecond=0)
    local = due.replace(tzinfo=None).isoformat()
    add = {"name": "water-plants", "prompt": "Remind Alice to water the plants.", "at": local}
    scene.fake_llm.push(
        Reply(tool_calls=[("cron_add", add)]),
        f"I will remind you at {local[11:]}.",
        "🌱 Time to water the plants!",
        "You're welcome.",
    )
    asked = await alice.send(room, f"remind me at {local[11:]} to water the plants")
    assert await chat.wait_reply(asked) == f"I will remind you at {local[11:]}."
    # The job is the time she named, in her zone (the model gave no zone).
    [job] = JobsFile(scene.tmp_path / "data").load_sync()
    assert job.timezone == ZONE and job.next_run == due.astimezone(UTC), job
    assert job.target == f"matrix:{room}"
    assert await first.stop() == 0

    second = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd-2.log")
    await chat.wait_text("water the plants!", timeout=LEAD_S + 60)
    [(reminder, _)] = [m for m in chat.messages() if "water the plants!" in m[1]]
    sent_at = datetime.fromtimestamp(reminder.event.server_timestamp / 1000, UTC)
    assert sent_at >= due, (sent_at, due)
    thanks = await alice.send(room, "thanks")
    assert await chat.wait_reply(thanks) == "You're welcome."
    assert await second.stop() == 0

    assert len(chat.containing("water the plants!")) == 1
    assert second.count("cron_run") == 1 and first.count("cron_run") == 0
    cron_turns = [r for r in scene.fake_llm.chat_requests if "water the plants." in user_text(r)]
    assert len(cron_turns) == 1
    assert len(scene.fake_llm.chat_requests) == 4
