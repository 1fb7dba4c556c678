"""Acceptance with a person on a current Element (matrix-js-sdk, Rust crypto, sharing room
keys only with cross-signed devices): squidd run with a data dir, `squidd matrix bootstrap`
showing the recovery key once, the data dir lost, `squidd matrix restore` from that key on a
fresh one, and the same encrypted DM going on with no identity change on her side; and a
person whose identity is reset held (no keys, nothing acted on, told once) until the
operator's `squidd matrix trust`."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.channels.matrix.identity.api import MatrixApi
from squidd.channels.matrix.identity.cross_signing import fingerprint, public_identity
from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import SynapseServer, User
from tests.support.daemon import DaemonProcess, squidd_argv
from tests.support.fake_llm import FakeLLM
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import (
    MatrixSquidd,
    dm_on_element,
    matrix_daemon_config,
    user_texts,
)

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]


async def squidd_cli(config: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            squidd_argv(config, *args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return await anyio.to_thread.run_sync(run)


async def master_of(synapse: SynapseServer, viewer: User, user_id: str) -> str:
    async with MatrixApi(synapse.url, viewer.user_id, viewer.access_token) as api:
        identity = public_identity(await api.query_keys([user_id]), user_id)
    assert identity is not None
    return identity.master


async def test_a_lost_data_dir_restored_from_the_recovery_key_keeps_the_dm_working(
    synapse: SynapseServer,
    bot: User,
    make_user: Callable[[str], User],
    make_element: Callable[..., Any],
    tmp_path: Path,
    fake_llm: FakeLLM,
    squidds: list[DaemonProcess],
) -> None:
    alice: ElementClient = await make_element("alice")
    viewer = make_user("viewer")
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = matrix_daemon_config(tmp_path / "first", fake_llm, synapse, bot, alice.user_id)
    daemon = await start_squidd(squidds, first, tmp_path / "first.log")
    room = await alice.create_dm(bot.user_id)
    await alice.wait_joined(room, bot.user_id)
    await alice.send_text(room, "before")
    [reply] = await alice.wait_messages(bot.user_id, room)
    assert reply["body"] == "echo: before" and reply["shield"]["colour"] == "NONE", reply
    master = await master_of(synapse, viewer, bot.user_id)

    # The operator's one-time step: the recovery key, shown once.
    shown = await squidd_cli(first, "matrix", "bootstrap")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    recovery_key = lines[lines.index(next(x for x in lines if x.startswith("recovery key"))) + 1]
    recovery_key = recovery_key.strip()
    assert len(recovery_key.split(" ")) > 10, shown.stdout
    again = await squidd_cli(first, "matrix", "bootstrap")
    assert again.returncode == 0 and recovery_key not in again.stdout, again.stdout
    assert "shown when it was made" in again.stdout

    # The disk is gone: a fresh data dir, restored from the key (read from stdin).
    await daemon.stop()
    second = matrix_daemon_config(tmp_path / "second", fake_llm, synapse, bot, alice.user_id)
    wrong = await squidd_cli(second, "matrix", "restore", stdin="EsTj 3yST y93F SLpB jJsz\n")
    assert wrong.returncode == 1 and "matrix:" in wrong.stderr, wrong
    restored = await squidd_cli(second, "matrix", "restore", stdin=recovery_key + "\n")
    assert restored.returncode == 0, restored.stderr
    assert "identity restored" in restored.stdout
    assert recovery_key not in restored.stdout + restored.stderr

    await start_squidd(squidds, second, tmp_path / "second.log")
    assert await master_of(synapse, viewer, bot.user_id) == master
    shown_master = f"master key {fingerprint(master)}"
    status = await squidd_cli(second, "status")
    assert shown_master in status.stdout, status.stdout
    assert "device cross-signed: yes, keys in secret storage: yes" in status.stdout
    check = await squidd_cli(second, "config", "check")
    assert f"master key: {fingerprint(master)}" in check.stdout, check.stdout
    assert "private keys in the data dir: yes" in check.stdout
    assert "cross-signed: yes" in check.stdout
    assert "secret storage holds the keys: yes" in check.stdout
    await alice.send_text(room, "after")
    replies = await alice.wait_messages(bot.user_id, room, count=2)
    assert [r["body"] for r in replies] == ["echo: before", "echo: after"], replies
    assert all(r["shield"]["colour"] == "NONE" for r in replies), replies
    trust = await alice.user_trust(bot.user_id)
    assert not trust["needs_user_approval"], trust  # no identity change on her side


async def test_a_reset_identity_is_held_until_the_operator_runs_squidd_matrix_trust(
    bot: User,
    make_user: Callable[[str], User],
    make_element: Callable[..., Any],
    fake_llm: FakeLLM,
    matrix_squidd: MatrixSquidd,
) -> None:
    alice: ElementClient = await make_element("alice")
    config, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await dm_on_element(alice, bot)
    await alice.send_text(room, "before")
    [reply] = await alice.wait_messages(bot.user_id, room)
    assert reply["body"] == "echo: before", reply

    # She resets her identity ("Reset your identity"): a new master key signs her device.
    before = await alice.bootstrap_cross_signing()
    after = await alice.bootstrap_cross_signing(reset=True)
    assert after["master_key"] != before["master_key"], (before, after)
    await alice.send_text(room, "after the reset")
    await daemon.wait_event("matrix_identity_changed")
    told = await alice.wait_messages(bot.user_id, room, count=2)
    assert "new identity" in str(told[1]["body"]), told
    assert f"squidd matrix trust {alice.user_id}" in str(told[1]["body"])
    assert user_texts(fake_llm) == ["before"]

    trusted = await squidd_cli(config, "matrix", "trust", alice.user_id)
    assert trusted.returncode == 0, trusted.stderr
    assert "the running daemon accepted" in trusted.stdout, trusted.stdout
    await alice.send_text(room, "after trust")
    replies = await alice.wait_messages(bot.user_id, room, count=3)
    assert replies[2]["body"] == "echo: after trust", replies
    assert user_texts(fake_llm) == ["before", "after trust"]
    assert daemon.count("matrix_identity_changed") == 1
