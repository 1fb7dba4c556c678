"""R6, email: a mail whose turn runs a shell command (appending a line to a file), the real
daemon SIGKILLed at each point of the turn (tests/faults/journal_support.py) against the real
Dovecot + Postfix, then started again: the mail comes back (it was never marked \\Seen) and
its turn resumes from the journal. The line is written once, or once and the model told the
outcome is unknown; one reply reaches the sender; the turn is in the history once; a
recorded model answer is never asked for again. Killed after the reply was stored for
delivery and before the send, the restart sends the stored reply, once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.email.mailbox import (
    ALICE,
    MailServer,
    bot_email_section,
    inject,
    make_mail,
    replies_for_alice,
    replies_in_alices_box,
)
from tests.faults.journal_support import (
    DONE,
    POINTS,
    check_turn,
    cut_at,
    history,
    journals,
    model_for,
    poll,
    shell_sections,
)
from tests.support.config import write_daemon_config
from tests.support.crash_points import crash_env
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.parametrize("point", POINTS)
async def test_an_email_turn_cut_short_resumes_from_its_journal(
    point: str, mail_server: MailServer, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    bot = mail_server.take_bot()
    path = tmp_path / "lines.txt"
    model = model_for(point, path)
    data = tmp_path / "data"
    (data / "workspace").mkdir(parents=True)  # the shell's working directory
    mail = make_mail(to=bot, subject="the line", body="append the line")
    asked = str(mail["Message-ID"])
    with FakeLLM(responder=model) as llm:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-faults-r6-mail-1",
            gateway={"delivery_retry_initial_s": 0.2, "delivery_retry_max_s": 1.0},
            email=bot_email_section(mail_server, bot),
            **shell_sections("email"),
        )

        async def start(crash_after: str = "") -> DaemonProcess:
            env = crash_env(crash_after)
            daemon = DaemonProcess(config, tmp_path / f"daemon-{len(daemons)}.log", env=env)
            daemons.append(daemon)
            await daemon.wait_event("email_connected")
            return daemon

        async def send() -> None:
            await inject(mail_server, mail, to=bot, sender=ALICE)

        await cut_at(point, model, path, start, send)
        await start()
        await replies_for_alice(mail_server, asked, timeout=120)
        await poll(lambda: not journals(data), "the journal removed after delivery")
        requests = llm.chat_requests
    replies = await replies_in_alices_box(mail_server, asked)
    assert len(replies) == 1
    assert DONE in replies[0].message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    check_turn(point, path, requests, history(data, ALICE))
