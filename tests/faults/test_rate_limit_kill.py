"""The per-sender rate limit across a SIGKILL: the counts are on disk (fsync'd with the
state file before the mail is handed on), so a daemon killed right after answering does
not come back with a fresh allowance; a mail loop across crashes stays limited."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.email.mailbox import (
    ALICE,
    MailServer,
    bot_email_section,
    inject,
    make_mail,
    read_mailbox,
    replies_for_alice,
)
from tests.faults.harness import Counts
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow, pytest.mark.timeout(300)]


async def test_rate_limit_counts_survive_a_sigkill(mail_server: MailServer, tmp_path: Path) -> None:
    bot = mail_server.take_bot()
    with FakeLLM(responder=lambda request: Reply(content="answered")) as llm:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-faults-rate-kill",
            email=bot_email_section(mail_server, bot, rate_limit_count=1, rate_limit_window_s=3600),
        )
        first = DaemonProcess(config, tmp_path / "first.log")
        try:
            await first.wait_event("email_connected")
            one = make_mail(to=bot, subject="one")
            await inject(mail_server, one, to=bot, sender=ALICE)
            await replies_for_alice(mail_server, str(one["Message-ID"]), timeout=60)
        finally:
            first.kill()
        two = make_mail(to=bot, subject="two")
        await inject(mail_server, two, to=bot, sender=ALICE)
        second = DaemonProcess(config, tmp_path / "second.log")
        try:
            await second.wait_event("email_deferred")
            [deferred] = [e for e in second.events() if e.get("event") == "email_deferred"]
            assert deferred["message_id"] == str(two["Message-ID"])
            assert deferred["retry_in_s"] > 3000
        finally:
            second.kill()
    # alice's mailbox is shared with the other mail tests of the session: count only the
    # replies to this test's two mails
    ours = {str(one["Message-ID"]), str(two["Message-ID"])}
    replies = [
        s for s in await read_mailbox(mail_server, ALICE) if str(s.message["In-Reply-To"]) in ours
    ]
    counts = Counts("rate limit across SIGKILL", sent=2, answered=len(replies))
    counts.extra["held_back"] = 1
    counts.report()
    assert [str(s.message["In-Reply-To"]) for s in replies] == [str(one["Message-ID"])]
