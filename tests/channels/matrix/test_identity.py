"""The bot's cross-signing identity on a real Synapse: created on the first start with
E2EE, the device signed (checked with our own verifier on what `/keys/query` returns to
another user), the same identity after a restart and on a new device, the keys in secret
storage, a fresh data dir restored from the recovery key, and user-interactive auth when
an identity is replaced."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from squidd.channels.matrix.identity.account import OwnIdentity, PasswordNeededError
from squidd.channels.matrix.identity.api import MatrixApi
from squidd.channels.matrix.identity.cross_signing import (
    PublicIdentity,
    device_cross_signed,
    device_keys,
    public_identity,
)
from squidd.channels.matrix.identity.local import IdentityFiles
from squidd.channels.matrix.identity.secret_storage import SecretStorageError
from tests.servers.synapse.server import SynapseServer, User
from tests.support.matrix import bot_settings
from tests.support.matrix_channel import run_channel

pytestmark = [pytest.mark.anyio, pytest.mark.matrix]


async def published(synapse: SynapseServer, viewer: User, user_id: str) -> dict:
    async with MatrixApi(synapse.url, viewer.user_id, viewer.access_token) as api:
        return await api.query_keys([user_id])


def signed_devices(query: dict, user_id: str) -> dict[str, bool]:
    """Each published device of `user_id`: cross-signed by its published identity?"""
    identity = public_identity(query, user_id)
    devices = query["device_keys"].get(user_id, {})
    return {
        device_id: identity is not None and device_cross_signed(identity, keys, device_id)
        for device_id, keys in devices.items()
    }


async def start_once(synapse: SynapseServer, bot: User, data_dir: Path) -> str:
    """Run the channel until connected; return its device id."""
    async with run_channel(bot_settings(synapse, bot), data_dir) as (channel, _):
        client = channel.client
        assert client is not None
        device_id: str = client.device_id
    return device_id


async def test_first_start_creates_and_signs_later_starts_keep_it(
    synapse: SynapseServer, bot: User, make_user: Callable[[str], User], data_dir: Path
) -> None:
    viewer = make_user("viewer")
    assert public_identity(await published(synapse, viewer, bot.user_id), bot.user_id) is None

    first_device = await start_once(synapse, bot, data_dir)
    query = await published(synapse, viewer, bot.user_id)
    identity = public_identity(query, bot.user_id)
    assert identity is not None and identity.self_signing is not None
    assert signed_devices(query, bot.user_id)[first_device] is True
    kept = json.loads((data_dir / "matrix" / "identity.json").read_text())
    assert (data_dir / "matrix" / "identity.json").stat().st_mode & 0o777 == 0o600
    assert kept["user_id"] == bot.user_id
    # Recovery key kept for `bootstrap` to show, 0600.
    recovery = data_dir / "matrix" / "recovery-key.txt"
    assert recovery.stat().st_mode & 0o777 == 0o600

    # A restart: same device, same identity, nothing uploaded again.
    assert await start_once(synapse, bot, data_dir) == first_device
    again = await published(synapse, viewer, bot.user_id)
    assert public_identity(again, bot.user_id) == identity

    # A lost device store and login: a new device, signed by the same identity.
    shutil.rmtree(data_dir / "matrix" / "store")
    (data_dir / "matrix" / "credentials.json").unlink()
    second_device = await start_once(synapse, bot, data_dir)
    assert second_device != first_device
    query = await published(synapse, viewer, bot.user_id)
    assert public_identity(query, bot.user_id) == identity
    assert signed_devices(query, bot.user_id)[second_device] is True


async def test_a_lost_data_dir_comes_back_from_the_recovery_key(
    synapse: SynapseServer, bot: User, make_user: Callable[[str], User], tmp_path: Path
) -> None:
    viewer = make_user("viewer")
    first_dir = tmp_path / "first"
    await start_once(synapse, bot, first_dir)
    identity = public_identity(await published(synapse, viewer, bot.user_id), bot.user_id)
    assert identity is not None
    recovery_key = (first_dir / "matrix" / "recovery-key.txt").read_text().strip()

    # A new disk: the daemon will not invent a second identity, and says what to run.
    fresh = tmp_path / "fresh"
    device = await start_once(synapse, bot, fresh)
    assert not (fresh / "matrix" / "identity.json").exists()
    query = await published(synapse, viewer, bot.user_id)
    assert public_identity(query, bot.user_id) == identity
    assert signed_devices(query, bot.user_id)[device] is False

    async with MatrixApi(synapse.url, bot.user_id, bot.access_token) as api:
        own = OwnIdentity(api, IdentityFiles(fresh), device_id=None, password=None)
        with pytest.raises(SecretStorageError, match=r"check digit|does not fit"):
            await own.restore(recovery_key[:-1] + ("a" if recovery_key[-1] != "a" else "b"))
        keys = await own.restore(recovery_key)
    assert keys.master.public == identity.master

    # The next start signs its device with the restored identity: same master key.
    device = await start_once(synapse, bot, fresh)
    query = await published(synapse, viewer, bot.user_id)
    assert public_identity(query, bot.user_id) == identity
    assert signed_devices(query, bot.user_id)[device] is True


async def test_replacing_an_identity_answers_user_interactive_auth(
    synapse: SynapseServer, bot: User, make_user: Callable[[str], User], data_dir: Path
) -> None:
    viewer = make_user("viewer")
    await start_once(synapse, bot, data_dir)
    before = public_identity(await published(synapse, viewer, bot.user_id), bot.user_id)
    assert before is not None
    files = IdentityFiles(data_dir)
    async with MatrixApi(synapse.url, bot.user_id, bot.access_token) as api:
        # Only a token: Synapse insists on auth to replace keys; one clear line, no change.
        token_only = OwnIdentity(api, files, device_id=None, password=None)
        with pytest.raises(PasswordNeededError, match="squidd matrix bootstrap"):
            await token_only.create(keep_recovery_key=False)
        kept = await files.load_keys(bot.user_id)
        assert kept is not None and kept.master.public == before.master
        assert public_identity(await published(synapse, viewer, bot.user_id), bot.user_id) == (
            before
        )
        # With the password it goes through m.login.password.
        with_password = OwnIdentity(api, files, device_id=None, password=bot.password)
        keys, recovery_key = await with_password.create(keep_recovery_key=False)
    after = public_identity(await published(synapse, viewer, bot.user_id), bot.user_id)
    assert isinstance(after, PublicIdentity)
    assert after.master == keys.master.public != before.master
    assert len(recovery_key.replace(" ", "")) > 40
    device = await start_once(synapse, bot, data_dir)
    query = await published(synapse, viewer, bot.user_id)
    assert device_keys(query, bot.user_id, device) is not None
    assert signed_devices(query, bot.user_id)[device] is True
