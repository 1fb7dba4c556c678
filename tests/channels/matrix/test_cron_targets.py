"""Cron targets people can write, checked when the job is added, against a real Synapse and
a `squidd run` child: `matrix:@alice:server` becomes the bot's direct chat with her (created
and her invited) and the job delivers there; a channel squidd does not have and a room the
bot is not in are refused with the reason, and no job is kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.servers.synapse.server import User
from tests.support.daemon import run_squidd
from tests.support.fake_llm import FakeLLM
from tests.support.matrix import wait_until
from tests.support.matrix_daemon import MatrixSquidd

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]


async def _squidd(config: Path, *args: str) -> Any:
    return await anyio.to_thread.run_sync(lambda: run_squidd(config, *args))


async def test_a_person_target_delivers_to_her_direct_chat(
    bot: User, make_human: Callable[..., Any], fake_llm: FakeLLM, matrix_squidd: MatrixSquidd
) -> None:
    alice = await make_human("alice")
    config, _ = await matrix_squidd.start(alice.user_id, "squidd.log")

    added = await _squidd(
        config, "cron", "add", "--name", "hello", "--every", "1d", "--prompt", "greet her",
        "--target", f"matrix:{alice.user_id}",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "to matrix:!" in added.stdout  # kept as the room it resolved to

    # She is invited to a new direct chat with the bot; she joins, the job runs now.
    async def invited() -> str:
        with anyio.fail_after(30):
            while not alice.client.invited_rooms:
                await alice.sync(timeout_ms=1000)
        return next(iter(alice.client.invited_rooms))

    room = await invited()
    assert f"to matrix:{room}" in added.stdout
    await alice.join(room)
    fake_llm.push("good morning, alice")
    ran = await _squidd(config, "cron", "run", "hello")
    assert ran.returncode == 0, ran.stderr

    def delivered() -> bool:
        return any(
            "good morning, alice" in str(s.event.source.get("content", {}).get("body", ""))
            or "good morning, alice" in str(getattr(s.event, "body", ""))
            for s in alice.from_sender(bot.user_id, room)
        )

    await alice.wait_for(delivered, "the cron job's message in her direct chat", timeout=60)


async def test_unknown_channels_and_rooms_the_bot_is_not_in_are_refused(
    bot: User, make_human: Callable[..., Any], matrix_squidd: MatrixSquidd
) -> None:
    alice = await make_human("alice")
    config, _ = await matrix_squidd.start(alice.user_id, "squidd.log")
    elsewhere = await alice.create_room([])  # the bot is not invited

    for target, reason in (
        ("telegram:1", "squidd has no 'telegram' channel"),
        (f"matrix:{elsewhere}", f"the bot is not in room {elsewhere}"),
        ("matrix:#nowhere:localhost", "no room has the alias #nowhere:localhost"),
        ("email:someone@example.org", "the email channel is not enabled"),
        ("matrix:alice", "a matrix target looks like"),
    ):
        refused = await _squidd(
            config, "cron", "add", "--name", "x", "--every", "1d", "--prompt", "p",
            "--target", target,
        )  # fmt: skip
        assert refused.returncode == 2, (target, refused.stdout)
        [line] = refused.stderr.splitlines()
        assert reason in line, (target, line)
    listing = await _squidd(config, "cron", "list")
    assert "No scheduled jobs." in listing.stdout


async def test_a_delivery_that_later_fails_shows_in_cron_list_and_status(
    bot: User, make_human: Callable[..., Any], fake_llm: FakeLLM, matrix_squidd: MatrixSquidd
) -> None:
    alice = await make_human("alice")
    config, _ = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await alice.room_with(bot.user_id, direct=False)
    added = await _squidd(
        config, "cron", "add", "--name", "news", "--every", "1d", "--prompt", "the news",
        "--target", f"matrix:{room}",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr

    # Accepted when added; then the bot is removed from the room, and the next run's reply
    # is refused by the homeserver for good.
    kicked = await alice.client.room_kick(room, bot.user_id)
    assert getattr(kicked, "status_code", None) is None, kicked
    fake_llm.push("today's news")
    ran = await _squidd(config, "cron", "run", "news")
    assert ran.returncode == 0, ran.stderr

    await wait_until(
        lambda: "LAST DELIVERY FAILED" in run_squidd(config, "cron", "list").stdout,
        "the failed delivery in cron list",
        timeout=60,
    )
    lines = (await _squidd(config, "cron", "list")).stdout.splitlines()
    [at] = [n for n, line in enumerate(lines) if "LAST DELIVERY FAILED" in line]
    assert lines[at - 1].startswith("news:")
    status = await _squidd(config, "status")
    assert status.returncode == 0, status.stderr
    assert "LAST DELIVERY FAILED" in status.stdout


async def test_rooms_lists_the_bots_rooms_with_names_and_members(
    bot: User, make_human: Callable[..., Any], matrix_squidd: MatrixSquidd
) -> None:
    alice = await make_human("alice")
    config, _ = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await alice.create_room([bot.user_id], name="Plans")
    await wait_until(
        lambda: room in run_squidd(config, "rooms", "--ids").stdout, "the room in squidd rooms"
    )
    listed = await _squidd(config, "rooms")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    [at] = [n for n, line in enumerate(lines) if line.startswith(room)]
    assert "Plans" in lines[at]
    assert alice.user_id in lines[at + 1] and bot.user_id in lines[at + 1]
