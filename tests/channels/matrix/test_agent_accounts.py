"""Two agents with two bot accounts in one daemon (`squidd run` on Synapse), talked to by a
person on an Element-grade client (matrix-js-sdk with Rust crypto, room keys only for
cross-signed devices): an encrypted DM with each bot; each answers from its own SOUL.md and
model; each account has its own device, cross-signing identity and recovery key (`squidd
matrix bootstrap --agent`); after a restart both identities are the ones they were."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squidd.channels.matrix.identity.cross_signing import fingerprint
from tests.channels.matrix.test_identity_element import master_of, squidd_cli
from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import SynapseServer, User
from tests.support.config import provider
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix import start_squidd
from tests.support.matrix_daemon import matrix_daemon_config

pytestmark = [pytest.mark.anyio, pytest.mark.matrix, pytest.mark.slow]


def _answer(request: dict[str, Any]) -> Reply:
    system = request["messages"][0]["content"]
    soul = "work" if "I do the work." in system else "home" if "I keep the home." in system else "?"
    said = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return Reply(content=f"{soul}/{request['model']}: {said}")


def _config(
    tmp: Path, llm: FakeLLM, second: FakeLLM, synapse: SynapseServer, bots: list[User], alice: str
) -> Path:
    workspaces = {}
    for name, soul in (("home", "I keep the home."), ("work", "I do the work.")):
        folder = tmp / f"{name}-ws"
        folder.mkdir(exist_ok=True)
        (folder / "SOUL.md").write_text(soul)
        workspaces[name] = str(folder)
    home, work = bots
    return matrix_daemon_config(
        tmp,
        llm,
        synapse,
        home,
        alice,
        llm={
            "providers": [provider("A", llm), provider("B", second)],
            "chain": ["A/model-a"],
            "max_retries": 0,
        },
        agents={
            "list": [
                {"name": "home", "workspace": workspaces["home"]},
                {
                    "name": "work",
                    "workspace": workspaces["work"],
                    "chain": ["B/model-b"],
                    "matrix": {"user_id": work.user_id, "password": work.password},
                },
            ]
        },
    )


async def test_two_bot_accounts_two_agents_over_encrypted_dms(
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
    work_bot = make_user("planner")
    fake_llm.responder = _answer
    with FakeLLM(responder=_answer) as second:
        config = _config(tmp_path, fake_llm, second, synapse, [bot, work_bot], alice.user_id)
        daemon = await start_squidd(squidds, config, tmp_path / "squidd-1.log")
        rooms = {}
        for name, account in (("home", bot), ("work", work_bot)):
            rooms[name] = await alice.create_dm(account.user_id)
            await alice.wait_joined(rooms[name], account.user_id)

        async def ask(name: str, account: User, text: str, count: int) -> dict[str, Any]:
            await alice.send_text(rooms[name], text)
            replies = await alice.wait_messages(account.user_id, rooms[name], count=count)
            return replies[-1]

        home = await ask("home", bot, "lights", 1)
        work = await ask("work", work_bot, "report", 1)
        assert home["body"] == "home/model-a: lights", home
        assert work["body"] == "work/model-b: report", work
        # Both sent as cross-signed devices of verified-looking identities: no warning shield.
        assert home["shield"]["colour"] == "NONE" and work["shield"]["colour"] == "NONE"
        masters = {
            name: await master_of(synapse, viewer, account.user_id)
            for name, account in (("home", bot), ("work", work_bot))
        }
        assert masters["home"] != masters["work"]

        # Each account's recovery key, shown once, by its own command.
        shown = await squidd_cli(config, "matrix", "bootstrap", "--agent", "work")
        assert shown.returncode == 0, shown.stderr
        assert f"master key: {fingerprint(masters['work'])}" in shown.stdout, shown.stdout
        assert "recovery key (shown once" in shown.stdout
        # The command that brings it back names the agent too (else it is [matrix]'s).
        assert "`squidd matrix restore --agent work`" in shown.stdout, shown.stdout
        default = await squidd_cli(config, "matrix", "bootstrap")
        assert f"master key: {fingerprint(masters['home'])}" in default.stdout, default.stdout
        assert "--agent" not in default.stdout
        none = await squidd_cli(config, "matrix", "bootstrap", "--agent", "home")
        assert none.returncode == 1 and "no Matrix account of its own" in none.stderr

        # doctor checks each account, the agent's by its name.
        checked = await squidd_cli(config, "doctor", "--json", "--no-llm-call")
        report = {c["name"]: c for c in json.loads(checked.stdout)["checks"]}
        for label in ("Matrix", "Matrix (work)"):
            for step in ("login", "sync", "device keys", "cross-signing"):
                assert report[f"{label} {step}"]["status"] == "ok", report[f"{label} {step}"]
        assert work_bot.user_id in report["Matrix (work) login"]["detail"]
        assert fingerprint(masters["work"]) in report["Matrix (work) cross-signing"]["detail"]

        status = await squidd_cli(config, "status", "--agent", "work")
        assert f"accounts matrix-work {work_bot.user_id} (connected)" in status.stdout, status

        # A restart: the same two identities, the same devices, the conversations go on.
        assert await daemon.stop() == 0
        again = await start_squidd(squidds, config, tmp_path / "squidd-2.log")
        work = await ask("work", work_bot, "again", 2)
        home = await ask("home", bot, "door", 2)
        assert work["body"] == "work/model-b: again", work
        assert home["body"] == "home/model-a: door", home
        for name, account in (("home", bot), ("work", work_bot)):
            assert await master_of(synapse, viewer, account.user_id) == masters[name]
            trust = await alice.user_trust(account.user_id)
            assert not trust["needs_user_approval"], trust
        assert await again.stop() == 0
    # Each model was asked by its own agent only, each message once.
    assert [m["model"] for m in fake_llm.chat_requests] == ["model-a", "model-a"]
    assert [m["model"] for m in second.chat_requests] == ["model-b", "model-b"]
    data = tmp_path / "data"
    assert (data / "agents" / "work" / "matrix").is_dir()
