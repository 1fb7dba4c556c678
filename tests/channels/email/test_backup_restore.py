"""A backup taken while `squidd run` answers mail (real Dovecot + Postfix, the scripted LLM),
restored into an empty folder and started from: the same sessions, MEMORY.md, cron jobs and
handled ids, no mail answered a second time, and the next mail answered once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.channels.email.mailbox import (
    MailServer,
    bot_email_section,
    mail_from_alice,
    replies_for_alice,
    replies_in_alices_box,
)
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess, run_squidd
from tests.support.fake_llm import FakeLLM, Reply, _last_user_text

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]


class HeldLLM:
    """Answers at once, except the request whose text contains `hold`, which waits."""

    def __init__(self, hold: str) -> None:
        self.hold = hold
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        text = _last_user_text(request)
        if self.hold in text:
            self.held.set()
            self.release.wait(120)
        return Reply(content=f"answer {len(text)}")


def config_at(tmp: Path, server: MailServer, bot: str, llm_url: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return write_daemon_config(
        tmp,
        llm_url,
        api_key="sk-test-email-backup-01",
        email=bot_email_section(server, bot, reconnect_initial_delay_s=0.2),
        cron={"poll_s": 0.2},
    )


async def mail(server: MailServer, bot: str, subject: str, body: str = "hello") -> str:
    return await mail_from_alice(server, bot, subject=subject, body=body)


async def replies(server: MailServer, message_id: str) -> int:
    return len(await replies_in_alices_box(server, message_id))


async def test_backup_while_answering_then_restore_and_start_from_it(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    llm = HeldLLM(hold="hold this one")
    with FakeLLM(responder=llm) as server:
        config = config_at(tmp_path / "a", mail_server, bot, server.base_url)
        data = tmp_path / "a" / "data"
        (data / "workspace").mkdir(parents=True)
        (data / "workspace" / "MEMORY.md").write_text("# Memory\nAlice likes tea.\n")
        added = run_squidd(
            config, "cron", "add", "--name", "weekly", "--prompt", "hi", "--every", "7d"
        )
        assert added.returncode == 0, added.stderr
        first = DaemonProcess(config, tmp_path / "a" / "daemon.log")
        daemons.append(first)
        await first.wait_log("email_connected")
        answered = [await mail(mail_server, bot, f"question {n}") for n in range(3)]
        for message_id in answered:
            await replies_for_alice(mail_server, message_id, timeout=60)

        # A turn is in flight (its history half written, its mail not yet seen): back up now.
        in_flight = await mail(mail_server, bot, "later", body="hold this one")
        assert await anyio.to_thread.run_sync(llm.held.wait, 60)
        archive = tmp_path / "backup.tar.gz"
        made = run_squidd(config, "backup", "create", str(archive), "--verify")
        assert made.returncode == 0, made.stderr
        assert "verified" in made.stdout
        llm.release.set()
        await replies_for_alice(mail_server, in_flight, timeout=60)
        await first.wait_log("email_acknowledged", count=4)
        assert await first.stop() == 0

        target = tmp_path / "b" / "data"
        restored = run_squidd(config, "backup", "restore", str(archive), "--target", str(target))
        assert restored.returncode == 0, restored.stderr
        assert (target / "workspace" / "MEMORY.md").read_text() == "# Memory\nAlice likes tea.\n"
        assert (target / "cron" / "jobs.json").read_bytes() == (
            data / "cron/jobs.json"
        ).read_bytes()
        handled = (target / "gateway" / "handled.jsonl").read_text()
        assert all(message_id in handled for message_id in answered)
        for history in (target / "sessions").glob("*.jsonl"):
            original = (data / "sessions" / history.name).read_bytes()
            assert original.startswith(history.read_bytes())  # the same, up to the backup

        config_b = config_at(tmp_path / "b", mail_server, bot, server.base_url)
        second = DaemonProcess(config_b, tmp_path / "b" / "daemon.log")
        daemons.append(second)
        await second.wait_log("email_connected")
        cron = run_squidd(config_b, "cron", "list")
        assert "weekly" in cron.stdout, cron.stdout + cron.stderr
        newest = await mail(mail_server, bot, "after the restore")
        await replies_for_alice(mail_server, newest, timeout=60)
        assert await second.stop() == 0
    for message_id in [*answered, in_flight, newest]:
        assert await replies(mail_server, message_id) == 1, message_id
