"""SAS verification of `squidd run` from a person on a current Element (matrix-js-sdk, Rust
crypto) on the real Synapse: the operator compares the emoji with `squidd matrix verify`,
which asks the running daemon; both sides end verified. A stranger's request is cancelled."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import SynapseServer, User
from tests.support.daemon import daemon_env, squidd_argv
from tests.support.matrix_daemon import MatrixSquidd, dm_on_element

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]

MakeElement = Callable[..., Any]


async def squidd_cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            squidd_argv(config, *args),
            env=daemon_env(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )

    return await anyio.to_thread.run_sync(run)


async def bot_device(person: ElementClient, bot: User) -> str:
    devices = await person.wait_devices(bot.user_id)
    assert len(devices) == 1, devices
    return str(devices[0])


@pytest.mark.parametrize("where", ["to-device", "in-room"])
async def test_sas_completes_on_both_sides_after_the_operator_confirms(
    where: str,
    synapse: SynapseServer,
    bot: User,
    make_element: MakeElement,
    matrix_squidd: MatrixSquidd,
) -> None:
    alice: ElementClient = await make_element("alice")
    config, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await alice.create_dm(bot.user_id)  # as people do: the bot is someone they talk to
    await alice.wait_joined(room, bot.user_id)
    device = await bot_device(alice, bot)
    before = await alice.device_trust(bot.user_id, device)
    assert before is not None and not before["locally_verified"], before
    assert not (await alice.user_trust(bot.user_id))["verified"]

    if where == "to-device":
        flow = await alice.request_verification(bot.user_id, device_id=device)
    else:  # Element's "Verify" in the person's DM with the bot
        flow = await alice.request_verification(bot.user_id, room_id=room)
    await alice.wait_verification(flow_id=flow["flow_id"], phase="Ready")
    await alice.start_sas(flow["flow_id"])
    shown = await alice.wait_verification(flow_id=flow["flow_id"], sas=True)

    listed = await squidd_cli(config, "matrix", "verify")
    assert listed.returncode == 0, listed.stderr
    names = "  ".join(f"{symbol} {name}" for symbol, name in shown["emoji"])
    assert names in listed.stdout, (listed.stdout, shown)
    assert " ".join(map(str, shown["decimal"])) in listed.stdout

    confirmed = await squidd_cli(config, "matrix", "verify", "--yes")
    assert confirmed.returncode == 0, confirmed.stderr
    await alice.confirm_sas(flow["flow_id"])
    done = await alice.wait_verification(flow_id=flow["flow_id"], phase="Done")
    assert done["cancel_code"] is None, done

    # Her side: the bot's identity is verified (its master key was in the bot's MAC).
    assert (await alice.wait_user_verified(bot.user_id))["verified"]
    after = await alice.device_trust(bot.user_id, device)
    assert after is not None and after["cross_signing_verified"], after
    # The bot's side: her device and identity checked; her master key signed by the bot.
    await daemon.wait_event("matrix_user_signed")
    [event] = [e for e in daemon.events() if e.get("event") == "matrix_verification_done"]
    assert event["user"] == alice.user_id and event["device"] == alice.device_id
    assert event["identity_verified"] is True
    query = {"device_keys": {alice.user_id: []}}
    keys = synapse.call("POST", "/_matrix/client/v3/keys/query", query, token=bot.access_token)
    assert bot.user_id in keys["master_keys"][alice.user_id]["signatures"]


async def test_a_strangers_request_is_cancelled(
    bot: User, make_element: MakeElement, matrix_squidd: MatrixSquidd
) -> None:
    alice: ElementClient = await make_element("alice")
    mallory: ElementClient = await make_element("mallory")
    config, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    # A group room of alice's where mallory meets the bot.
    room = await alice.create_room([bot.user_id, mallory.user_id])
    await mallory.wait_joined(room, bot.user_id)
    device = await bot_device(mallory, bot)

    flow = await mallory.request_verification(bot.user_id, device_id=device)
    cancelled = await mallory.wait_verification(flow_id=flow["flow_id"], phase="Cancelled")
    assert cancelled["cancel_code"] == "m.user" and cancelled["cancelled_by"] == bot.user_id
    assert daemon.count("matrix_verification_refused") == 1
    listed = await squidd_cli(config, "matrix", "verify", "--yes")
    assert "no verification waits" in listed.stderr


async def test_the_operators_no_cancels_on_her_side_and_nothing_is_verified(
    bot: User, make_element: MakeElement, matrix_squidd: MatrixSquidd
) -> None:
    alice: ElementClient = await make_element("alice")
    config, daemon = await matrix_squidd.start(alice.user_id, "squidd.log")
    room = await dm_on_element(alice, bot)
    flow = await alice.request_verification(bot.user_id, room_id=room)
    await alice.wait_verification(flow_id=flow["flow_id"], phase="Ready")
    await alice.start_sas(flow["flow_id"])
    await alice.wait_verification(flow_id=flow["flow_id"], sas=True)

    refused = await squidd_cli(config, "matrix", "verify", alice.user_id, "--no")
    assert refused.returncode == 0, refused.stderr
    cancelled = await alice.wait_verification(flow_id=flow["flow_id"], phase="Cancelled")
    assert cancelled["cancel_code"] == "m.mismatched_sas", cancelled
    assert not (await alice.user_trust(bot.user_id))["verified"]
    assert daemon.count("matrix_verification_done") == daemon.count("matrix_user_signed") == 0


async def sas_done(alice: ElementClient, bot: User, config: Path, device: str) -> None:
    """A verification from her request to both sides done, the operator saying yes."""
    again = await alice.request_verification(bot.user_id, device_id=device)
    await alice.wait_verification(flow_id=again["flow_id"], phase="Ready")
    await alice.start_sas(again["flow_id"])
    await alice.wait_verification(flow_id=again["flow_id"], sas=True)
    assert (await squidd_cli(config, "matrix", "verify", "--yes")).returncode == 0
    await alice.confirm_sas(again["flow_id"])
    await alice.wait_verification(flow_id=again["flow_id"], phase="Done")
    assert (await alice.wait_user_verified(bot.user_id))["verified"]


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
async def test_a_verification_cut_by_a_restart_is_cancelled_for_her_and_a_new_one_completes(
    stop: int, bot: User, make_element: MakeElement, matrix_squidd: MatrixSquidd
) -> None:
    alice: ElementClient = await make_element("alice")
    config, first = await matrix_squidd.start(alice.user_id, "squidd-1.log")
    room = await dm_on_element(alice, bot)
    device = await bot_device(alice, bot)
    flow = await alice.request_verification(bot.user_id, device_id=device)
    await alice.wait_verification(flow_id=flow["flow_id"], phase="Ready")
    await alice.start_sas(flow["flow_id"])
    await alice.wait_verification(flow_id=flow["flow_id"], sas=True)

    await first.stop(stop)  # the exchange's secret dies with that process
    second = await matrix_squidd.again(config, "squidd-2.log")
    # Her client is told at once, without a step of hers, and the DM says why.
    cancelled = await alice.wait_verification(flow_id=flow["flow_id"], phase="Cancelled")
    assert cancelled["cancel_code"] == "m.user", cancelled
    assert cancelled["cancelled_by"] == bot.user_id, cancelled
    [notice] = await alice.wait_messages(bot.user_id, room)
    assert "interrupted by a restart" in notice["body"] and "start it again" in notice["body"]
    assert second.count("matrix_verification_restored") == 1

    await sas_done(alice, bot, config, device)
    assert second.count("child_crashed") == 0


async def test_a_request_answered_before_a_restart_goes_on_after_it(
    bot: User, make_element: MakeElement, matrix_squidd: MatrixSquidd
) -> None:
    alice: ElementClient = await make_element("alice")
    config, first = await matrix_squidd.start(alice.user_id, "squidd-1.log")
    await dm_on_element(alice, bot)
    device = await bot_device(alice, bot)
    flow = await alice.request_verification(bot.user_id, device_id=device)
    await alice.wait_verification(flow_id=flow["flow_id"], phase="Ready")

    await first.stop(signal.SIGKILL)  # nothing secret yet: the flow can go on
    second = await matrix_squidd.again(config, "squidd-2.log")
    await alice.start_sas(flow["flow_id"])
    await alice.wait_verification(flow_id=flow["flow_id"], sas=True)
    assert (await squidd_cli(config, "matrix", "verify", "--yes")).returncode == 0
    await alice.confirm_sas(flow["flow_id"])
    done = await alice.wait_verification(flow_id=flow["flow_id"], phase="Done")
    assert done["cancel_code"] is None, done
    assert (await alice.wait_user_verified(bot.user_id))["verified"]
    assert second.count("matrix_verification_restored") == 1
