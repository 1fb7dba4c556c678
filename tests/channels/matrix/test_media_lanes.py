"""Media downloads off the sync loop, on a real Synapse: a file still downloading in one room
does not hold back another room's messages, and within a room the order stays the
timeline's; a daemon stopped or killed while a file downloads answers it exactly once. The download
is held at a proxy gate in front of the homeserver, so "still downloading" is a fact the test
controls, not a matter of timing."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from squidd.store.media import MediaStore
from tests.channels.matrix.media_gate import MediaGate
from tests.servers.synapse.server import SynapseServer, User
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM
from tests.support.matrix import bot_settings, wait_until
from tests.support.matrix_channel import run_channel
from tests.support.matrix_daemon import MatrixSquidd
from tests.support.matrix_files import send_file

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]

MakeHuman = Callable[..., Any]


@pytest.fixture
async def gate(synapse: SynapseServer) -> AsyncIterator[MediaGate]:
    async with MediaGate(synapse.url) as proxy:
        yield proxy


async def test_a_download_in_one_room_does_not_hold_back_another_room(
    synapse: SynapseServer,
    bot: User,
    make_human: MakeHuman,
    data_dir: Path,
    gate: MediaGate,
) -> None:
    alice = await make_human("alice")
    settings = bot_settings(synapse, bot, allowed_users=[alice.user_id], homeserver=gate.url)
    store = MediaStore(data_dir, lifetime_s=3600)
    report = b"quarterly numbers\n" * 20_000
    async with run_channel(settings, data_dir, media=store) as (_channel, inbox):
        room_a = await alice.create_room([bot.user_id], direct=True, name="A")
        room_b = await alice.create_room([bot.user_id], direct=True, name="B")
        for room in (room_a, room_b):
            await alice.wait_for(lambda r=room: alice.membership(r, bot.user_id) == "join", "join")
        gate.close()
        await send_file(
            alice,
            room_a,
            report,
            msgtype="m.file",
            name="report.txt",
            mime="text/plain",
            encrypted=False,
        )
        await alice.send(room_a, "that was the report")
        await alice.send(room_b, "hello from B")
        # While A's download is held, B's message is handed on; A's text waits behind A's file.
        await wait_until(lambda: "hello from B" in inbox.texts(), "room B's message")
        await wait_until(lambda: gate.started == 1, "A's download reached the homeserver")
        assert gate.finished == 0
        assert inbox.texts() == ["hello from B"]
        gate.release()
        await wait_until(lambda: len(inbox.received) == 3, "room A's messages")
        await inbox.all_acked()
    assert inbox.texts() == ["hello from B", "[file: report.txt]", "that was the report"]
    [att] = inbox.received[1].attachments
    assert att.path is not None and Path(att.path).read_bytes() == report
    assert gate.finished == 1


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["restart", "crash"])
async def test_a_restart_mid_download_answers_the_file_once(
    sig: signal.Signals,
    synapse: SynapseServer,
    bot: User,
    make_human: MakeHuman,
    tmp_path: Path,
    fake_llm: FakeLLM,
    gate: MediaGate,
    squidds: list[DaemonProcess],
    matrix_squidd: MatrixSquidd,
) -> None:
    alice = await make_human("alice")
    config = write_daemon_config(
        tmp_path,
        fake_llm.base_url,
        api_key="sk-test-matrix-media-0001",
        gateway={"shutdown_grace_s": 10},
        matrix={
            "enabled": True,
            "homeserver": gate.url,
            "user_id": bot.user_id,
            "password": bot.password,
            "allowed_users": [alice.user_id],
            "sync_timeout_s": 5,
            **synapse.bot_rate,
            "reconnect_initial_delay_s": 0.2,
            "reconnect_max_delay_s": 1.0,
        },
    )
    first = await matrix_squidd.again(config, "squidd-1.log")
    room = await alice.create_room([bot.user_id], direct=True)
    await alice.wait_for(lambda: alice.membership(room, bot.user_id) == "join", "bot joins")

    gate.close()
    notes = b"buy milk\n" * 10_000
    sent = await send_file(
        alice, room, notes, msgtype="m.file", name="notes.txt", mime="text/plain", encrypted=False
    )
    await wait_until(lambda: gate.started == 1, "the download reached the homeserver")
    # Stopped (or killed) while the file is still downloading.
    assert await first.stop(sig) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    assert gate.finished == 0 and not fake_llm.chat_requests

    gate.release()
    second = DaemonProcess(config, tmp_path / "squidd-2.log")
    squidds.append(second)
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, sent), "reply to the file")
    later = await alice.send(room, "later")
    await alice.wait_for(lambda: alice.replies_to(bot.user_id, later), "reply to later")
    assert await second.stop() == 0

    assert len(alice.replies_to(bot.user_id, sent)) == 1
    assert len(fake_llm.chat_requests) == 2  # the file once, "later" once
    assert gate.started == 2 and gate.finished == 1
