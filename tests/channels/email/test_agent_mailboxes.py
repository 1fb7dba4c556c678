"""Two agents with a mailbox each in one daemon (real Dovecot and Postfix, `squidd run` as a
real process): mail to the bot's mailbox is the default agent's, mail to the planner's own
mailbox the planner's — whatever its +tag or subject — answered from that mailbox's address,
each once, across a SIGKILL in the middle of the planner's turn; doctor checks both."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.channels.email.mailbox import (
    ALICE,
    PASSWORD,
    MailServer,
    inject,
    make_mail,
    replies_for_alice,
)
from tests.channels.email.test_agents_mail import Souls, _body
from tests.channels.email.test_daemon import write_config
from tests.support.daemon import DaemonProcess, squidd_argv
from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]


def _doctor(config: Path) -> dict[str, Any]:
    done = subprocess.run(
        squidd_argv(config, "doctor", "--json", "--no-llm-call"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


async def test_a_mailbox_of_its_own_reaches_its_agent_once_across_a_kill(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    planner = mail_server.take_bot()
    workspaces = {}
    for name, soul in (("home", "I keep the home."), ("planner", "I plan.")):
        folder = tmp_path / f"{name}-ws"
        folder.mkdir()
        (folder / "SOUL.md").write_text(soul)
        workspaces[name] = str(folder)
    secret = tmp_path / "planner-password"
    secret.write_text(PASSWORD + "\n")
    model = Souls()
    with FakeLLM(responder=model) as server:
        config = write_config(
            tmp_path,
            mail_server,
            bot,
            server.base_url,
            agents={
                "list": [
                    {"name": "home", "workspace": workspaces["home"]},
                    {
                        "name": "planner",
                        "workspace": workspaces["planner"],
                        "email": {"address": planner, "password_file": str(secret)},
                    },
                ]
            },
        )
        first = DaemonProcess(config, tmp_path / "first.log")
        daemons.append(first)
        await first.wait_log("email_connected")
        to_home = make_mail(to=bot, subject="lights")
        to_planner = make_mail(to=planner, subject="week")
        await inject(mail_server, to_home, to=bot, sender=ALICE)
        [home_reply] = await replies_for_alice(mail_server, str(to_home["Message-ID"]), timeout=60)
        await inject(mail_server, to_planner, to=planner, sender=ALICE)
        assert await anyio.to_thread.run_sync(model.held.wait, 60)
        first.kill()  # in the middle of the planner's turn
        model.release.set()

        second = DaemonProcess(config, tmp_path / "second.log")
        daemons.append(second)
        planner_id = str(to_planner["Message-ID"])
        [planner_reply] = await replies_for_alice(mail_server, planner_id, timeout=60)
        later = make_mail(to=planner, subject="after")
        await inject(mail_server, later, to=planner, sender=ALICE)
        [later_reply] = await replies_for_alice(mail_server, str(later["Message-ID"]), timeout=60)
        report = await anyio.to_thread.run_sync(_doctor, config)
        assert await second.stop() == 0

    assert _body(home_reply) == "home answers lights"
    assert _body(planner_reply) == "planner answers week"
    assert _body(later_reply) == "planner answers after"
    assert bot in str(home_reply.message["From"])
    assert planner in str(planner_reply.message["From"])
    assert planner in str(later_reply.message["From"])
    assert len(await replies_for_alice(mail_server, str(to_home["Message-ID"]))) == 1
    assert len(await replies_for_alice(mail_server, planner_id)) == 1
    assert model.asked.count("home:lights") == 1
    assert set(model.asked) == {"home:lights", "planner:week", "planner:after"}
    assert (tmp_path / "data" / "agents" / "planner" / "email").is_dir()
    for name in ("IMAP login", "IMAP login (planner)", "SMTP login", "SMTP login (planner)"):
        assert report[name]["status"] == "ok", report[name]
    assert planner in report["IMAP login (planner)"]["detail"]
