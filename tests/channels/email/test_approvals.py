"""Approval by mail, as a real `squidd run` against Dovecot + Postfix: the bot's prompt mail
names the exact command; Alice's reply "yes" (quoting the prompt, as mail clients do) runs it
once and the turn's answer follows; her reply "no" to the next prompt never runs it. The
answering mails are taken (seen) without an answer of their own."""

from __future__ import annotations

import re
from email.message import EmailMessage
from pathlib import Path

import pytest

from squidd.store.audit import AuditFile
from tests.channels.email.mailbox import (
    ALICE,
    MailServer,
    bot_email_section,
    find,
    inject,
    mail_from_alice,
    make_mail,
    replies_for_alice,
)
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]

COMMAND = "echo ran >> ran.txt"
SHELL = Reply(tool_calls=[("shell", {"command": COMMAND})])


def _text(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content())


def _reply_to(prompt_mail: object, bot: str, answer: str) -> object:
    message = prompt_mail.message  # type: ignore[attr-defined]
    body = _text(message)
    quoted = "\n".join(f"> {line}" for line in body.splitlines())
    return make_mail(
        to=bot,
        subject=f"Re: {message['Subject'].removeprefix('Re: ')}",
        body=f"{answer}\n\nOn Monday the bot wrote:\n{quoted}\n",
        headers={"In-Reply-To": message["Message-ID"], "References": message["Message-ID"]},
    )


async def _prompt(server: MailServer, asked: str) -> tuple[object, str]:
    [prompt] = await replies_for_alice(server, asked, timeout=60)
    body = _text(prompt.message)
    found = re.search(r"Approval needed \(([0-9a-f]{8})\): Run shell: (.*)\?", body)
    assert found is not None and found.group(2) == COMMAND, body
    return prompt, found.group(1)


async def test_a_reply_yes_runs_the_command_once_and_no_never(
    mail_server: MailServer, bot: str, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    marker = tmp_path / "ws" / "ran.txt"
    with FakeLLM() as llm:
        llm.push(SHELL, "ran it", SHELL, "did not run it")
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-email-approvals-0001",
            gateway={"delivery_retry_initial_s": 0.2, "delivery_retry_max_s": 1.0},
            agents={"workspace": str(tmp_path / "ws")},
            email=bot_email_section(mail_server, bot),
            **{
                "tools.shell": {"enabled": True},
                "tools.policy": {"default_deny": []},
                "tools.approval": {"approvers": [ALICE]},
            },
        )
        daemon = DaemonProcess(config, tmp_path / "squidd.log")
        try:
            await daemon.wait_log("email_connected")
            first = await mail_from_alice(
                mail_server, bot, subject="housekeeping", body="run the echo please"
            )
            prompt, _ = await _prompt(mail_server, first)
            yes = _reply_to(prompt, bot, "Yes")
            await inject(mail_server, yes, to=bot, sender=ALICE)  # type: ignore[arg-type]
            await replies_for_alice(mail_server, first, count=2)
            assert marker.read_text() == "ran\n"

            second = await mail_from_alice(mail_server, bot, subject="again", body="and once more")
            prompt, _ = await _prompt(mail_server, second)
            no = _reply_to(prompt, bot, "no")
            await inject(mail_server, no, to=bot, sender=ALICE)  # type: ignore[arg-type]
            answers = await replies_for_alice(mail_server, second, count=2)
            assert marker.read_text() == "ran\n"
            bodies = [_text(a.message).strip() for a in answers]
            assert "did not run it" in bodies
            for answer in (yes, no):
                answer_id = str(answer["Message-ID"])  # type: ignore[index]
                assert "\\Seen" in (await find(mail_server, bot, answer_id)).flags
                assert not await replies_for_alice(mail_server, answer_id, count=0)
        finally:
            daemon.kill()
    records = AuditFile(tmp_path / "data").records()
    assert [(r["decision"], r["by"]) for r in records] == [("approved", ALICE), ("denied", ALICE)]
