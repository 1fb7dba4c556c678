"""Two agents on one mailbox, told apart by plus-addressing (real Dovecot and Postfix,
`squidd run` as a real process): a mail to the bot is the default agent's, a mail to
bot+planner@ the planner's; each answered once by the right one, from its own SOUL.md,
across a SIGKILL in the middle of the planner's turn."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.channels.email.mailbox import ALICE, MailServer, inject, make_mail, replies_for_alice
from tests.channels.email.test_daemon import write_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]


class Souls:
    """Answers as the SOUL.md in the system prompt says; holds the planner's first turn
    until released (the daemon is killed meanwhile)."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()
        self.asked: list[str] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        system = request["messages"][0]["content"]
        soul = "planner" if "I plan." in system else "home" if "I keep the home." in system else "?"
        said = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        subject = str(said).splitlines()[0].removeprefix("Subject: ")
        self.asked.append(f"{soul}:{subject}")
        if soul == "planner" and not self.held.is_set():
            self.held.set()
            self.release.wait(120)
        return Reply(content=f"{soul} answers {subject}")


def _body(reply: Any) -> str:
    plain = reply.message.get_body(preferencelist=("plain",))
    assert plain is not None
    return str(plain.get_content()).strip().splitlines()[0]


async def test_plus_addressing_reaches_each_agent_once_across_a_kill(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    local, _, domain = bot.partition("@")
    planner_address = f"{local}+planner@{domain}"
    workspaces = {}
    for name, soul in (("home", "I keep the home."), ("planner", "I plan.")):
        folder = tmp_path / f"{name}-ws"
        folder.mkdir()
        (folder / "SOUL.md").write_text(soul)
        workspaces[name] = str(folder)
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
                    {"name": "planner", "workspace": workspaces["planner"]},
                ]
            },
        )
        first = DaemonProcess(config, tmp_path / "first.log")
        daemons.append(first)
        await first.wait_log("email_connected")
        to_home = make_mail(to=bot, subject="lights")
        to_planner = make_mail(to=planner_address, subject="week")
        await inject(mail_server, to_home, to=bot, sender=ALICE)
        [home_reply] = await replies_for_alice(mail_server, str(to_home["Message-ID"]), timeout=60)
        await inject(mail_server, to_planner, to=bot, sender=ALICE)
        assert await anyio.to_thread.run_sync(model.held.wait, 60)
        first.kill()  # in the middle of the planner's turn
        model.release.set()

        second = DaemonProcess(config, tmp_path / "second.log")
        daemons.append(second)
        planner_id = str(to_planner["Message-ID"])
        [planner_reply] = await replies_for_alice(mail_server, planner_id, timeout=60)
        later = make_mail(to=planner_address, subject="after")
        await inject(mail_server, later, to=bot, sender=ALICE)
        await replies_for_alice(mail_server, str(later["Message-ID"]), timeout=60)
        assert await second.stop() == 0

    assert _body(home_reply) == "home answers lights"
    assert _body(planner_reply) == "planner answers week"
    assert len(await replies_for_alice(mail_server, str(to_home["Message-ID"]))) == 1
    assert len(await replies_for_alice(mail_server, planner_id)) == 1
    assert model.asked.count("home:lights") == 1
    assert set(model.asked) == {"home:lights", "planner:week", "planner:after"}
    assert (tmp_path / "data" / "agents" / "planner" / "sessions").is_dir()
