"""The first start against a mailbox that is already full (`email.backlog`, default skip):
a real `squidd run` against Dovecot + Postfix with 20 unseen mails waiting. None of them is
answered or marked read, one log line gives the count, and the next mail is answered; a
restart does not take the backlog up again. With `backlog = "answer"` they are answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.channels.email.mailbox import (
    ALICE,
    MailServer,
    append,
    bot_email_section,
    inject,
    mail_from_alice,
    make_mail,
    read_mailbox,
    replies_for_alice,
    replies_to,
)
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]

OLD = 20


def config(tmp: Path, server: MailServer, bot: str, llm_url: str, **email: Any) -> Path:
    section = bot_email_section(server, bot, reconnect_initial_delay_s=0.2, **email)
    if "backlog" not in email:
        del section["backlog"]  # the default, as a new user has it
    return write_daemon_config(tmp, llm_url, api_key="sk-test-email-backlog-01", email=section)


async def fill(server: MailServer, bot: str, count: int) -> list[str]:
    ids = []
    for number in range(count):
        mail = make_mail(to=bot, subject=f"old {number}")
        await append(server, bot, mail)
        ids.append(str(mail["Message-ID"]))
    return ids


async def answered(server: MailServer, ids: list[str]) -> list[str]:
    box = await read_mailbox(server, ALICE)
    return [i for i in ids if any(replies_to(i)(s.message) for s in box)]


async def test_the_backlog_at_first_start_is_skipped_and_new_mail_answered(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    old = await fill(mail_server, bot, OLD)
    with FakeLLM(responder=lambda req: Reply(content="hello")) as llm:
        path = config(tmp_path, mail_server, bot, llm.base_url)
        first = DaemonProcess(path, tmp_path / "first.log")
        daemons.append(first)
        await first.wait_event("email_backlog_skipped")
        [line] = [e for e in first.events() if e["event"] == "email_backlog_skipped"]
        assert line["count"] == OLD

        new = make_mail(to=bot, subject="after the start")
        await inject(mail_server, new, to=bot, sender=ALICE)
        await replies_for_alice(mail_server, str(new["Message-ID"]), timeout=60)
        assert await first.stop() == 0

        second = DaemonProcess(path, tmp_path / "second.log")  # not a first start any more
        daemons.append(second)
        await second.wait_log("email_connected")
        later = await mail_from_alice(mail_server, bot, subject="after the restart")
        await replies_for_alice(mail_server, later, timeout=60)
        assert await second.stop() == 0

        assert second.count("email_backlog_skipped") == 0
        assert len(llm.chat_requests) == 2
    assert await answered(mail_server, old) == []
    box = {str(s.message["Message-ID"]): s.flags for s in await read_mailbox(mail_server, bot)}
    assert [i for i in old if "\\Seen" in box[i]] == []  # left for a human, as they were


async def test_backlog_answer_answers_the_mail_already_there(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    old = await fill(mail_server, bot, 3)
    with FakeLLM(responder=lambda req: Reply(content="hello")) as llm:
        path = config(tmp_path, mail_server, bot, llm.base_url, backlog="answer")
        daemon = DaemonProcess(path, tmp_path / "daemon.log")
        daemons.append(daemon)
        for message_id in old:
            await replies_for_alice(mail_server, message_id, timeout=60)
        assert daemon.count("email_backlog_skipped") == 0
