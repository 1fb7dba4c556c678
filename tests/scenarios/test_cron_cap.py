"""Cron jobs against the daily cap: the owner's chat on Matrix, jobs added from the CLI."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from tests.support.daemon import daemon_env, squidd_argv
from tests.support.fake_llm import Reply
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import Chat, handled_ids, matrix_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

REFUSAL = "Budget for scheduled jobs is used up for today."


async def cron_add(config: Path, name: str, prompt: str, target: str) -> None:
    """`squidd cron add` for a job due a moment from now, as the owner types it (the moment
    long enough for the command to start on a loaded machine: a time already past is
    refused)."""
    at = (datetime.now(UTC) + timedelta(seconds=8)).isoformat(timespec="seconds")
    argv = squidd_argv(config, "cron", "add", "--name", name, "--prompt", prompt, "--at", at)
    done = await anyio.run_process(
        [*argv, "--target", target], env=daemon_env(), check=False, stderr=subprocess.STDOUT
    )
    assert done.returncode == 0, done.stdout.decode()


async def test_cron_jobs_over_the_daily_cap_get_no_model_call_and_the_owner_is_told_once(
    scene: MatrixScene,
) -> None:
    """Alice owns the bot and allows its scheduled jobs 1000 tokens a day
    (`limits.cron_daily_tokens`); she is the one to be told (`limits.notify_target`, her
    chat with the bot). She adds a job from the command line: it runs, its summary (which
    spent 1100 tokens) arrives in her chat. Then she adds two more, due at the same moment:
    each gets the fixed refusal in her chat instead of a model call, and she is told about the
    cap once, not twice."""
    alice = await scene.make_human("alice")
    # Her chat with the bot exists before the bot first starts (it joins as it starts), so
    # the notice target can name it.
    room = await alice.create_room([scene.bot.user_id], direct=True)
    config = matrix_config(
        scene.tmp_path,
        scene.fake_llm.base_url,
        scene.synapse,
        scene.bot,
        [alice.user_id],
        cron={"poll_s": 0.5},
        limits={
            "cron_daily_tokens": 1000,
            "notify_target": f"matrix:{room}",
            "refusal_text": REFUSAL,
        },
    )
    daemon = await start_squidd(scene.squidds, config, scene.tmp_path / "squidd.log")
    await alice.wait_for(lambda: alice.membership(room, scene.bot.user_id) == "join", "bot joins")
    chat = Chat(alice, scene.bot.user_id, room)

    scene.fake_llm.push(Reply(content="Today's summary: all quiet.", usage=(900, 200, 0)))
    await cron_add(config, "summary", "Summarise the day.", f"matrix:{room}")
    await chat.wait_text("Today's summary: all quiet.")
    async with anyio.create_task_group() as tg:  # typed in two terminals at once
        tg.start_soon(cron_add, config, "later-1", "Summarise again.", f"matrix:{room}")
        tg.start_soon(cron_add, config, "later-2", "And once more.", f"matrix:{room}")
    await chat.wait_text(REFUSAL, count=2)
    await chat.wait_text("reached its daily cap")
    await daemon.wait_event("cron_job_finished", count=3)
    # Something after, so a second notice would have had its time to arrive.
    scene.fake_llm.push("Hello Alice.")
    hello = await alice.send(room, "hello")
    assert await chat.wait_reply(hello) == "Hello Alice."
    assert await daemon.stop() == 0

    assert len(scene.fake_llm.chat_requests) == 2  # the first job and "hello"; none for the refused
    notices = chat.containing("reached its daily cap")
    assert len(notices) == 1 and "cron_daily_tokens (1100 of 1000)" in notices[0], notices
    assert len(chat.containing(REFUSAL)) == 2
    assert daemon.count("turn_refused_daily_cap") == 2
    notices_handled = [i for i in handled_ids(scene.tmp_path / "data") if i.startswith("limits@")]
    assert len(notices_handled) == 1, notices_handled
