"""R1: 100 mails from an allowed sender while the daemon is SIGKILLed at random moments (at
least 5 times) and restarted, against real Dovecot + Postfix: each mail is answered exactly
once. A last mail, answered after all of them, shows no late second answer is still coming."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.channels.email.mailbox import (
    DOMAIN,
    MailServer,
    bot_email_section,
    inject,
    make_mail,
    read_mailbox,
    replies_to,
    wait_for,
)
from tests.faults.harness import Counts, seeded
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow, pytest.mark.timeout(600)]

ALICE = f"alice@{DOMAIN}"
MAILS = 100
KILLS = 5


@pytest.fixture
def daemons() -> Iterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for daemon in started:
        daemon.kill()


def echo(request: dict[str, object]) -> Reply:
    messages = request["messages"]
    assert isinstance(messages, list)
    user = [m for m in messages if m["role"] == "user"][-1]["content"]
    # A little model time, so some kills land in the middle of a turn.
    return Reply(content=f"answer: {str(user).splitlines()[0]}", delay=0.05)


async def test_every_mail_is_answered_exactly_once_through_sigkills(
    mail_server: MailServer,
    tmp_path: Path,
    daemons: list[DaemonProcess],
) -> None:
    rng = seeded("R1")
    bot = mail_server.take_bot()
    ids: list[str] = []
    crashes = 0
    with FakeLLM(responder=echo) as llm:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-faults-r1-0001",
            gateway={
                # This scenario is about kills, not poison: a mail in flight at every kill
                # must not be parked as one that kills the daemon.
                "max_attempts": KILLS + 1,
                "delivery_retry_initial_s": 0.2,
                "delivery_retry_max_s": 1.0,
                "restart_initial_delay_s": 0.2,
                "restart_max_delay_s": 1.0,
            },
            email=bot_email_section(
                mail_server,
                bot,
                reconnect_initial_delay_s=0.2,
                reconnect_max_delay_s=1.0,
                # The mail-loop guard would defer most of 100 mails from one sender.
                rate_limit_count=1000,
            ),
        )

        def start() -> DaemonProcess:
            daemon = DaemonProcess(config, tmp_path / f"daemon-{len(daemons)}.log")
            daemons.append(daemon)
            return daemon

        async def send_all() -> None:
            for i in range(MAILS):
                mail = make_mail(to=bot, subject=f"mail {i}", body=f"question {i}")
                ids.append(str(mail["Message-ID"]))
                await inject(mail_server, mail, to=bot, sender=ALICE, message_id="")
                await anyio.sleep(rng.uniform(0, 0.1))

        async with anyio.create_task_group() as group:
            group.start_soon(send_all)
            for _ in range(KILLS):
                daemon = start()
                await anyio.sleep(rng.uniform(0.8, 3.0))
                if daemon.proc.poll() is not None:
                    crashes += 1
                daemon.kill()
        final = start()
        everything = set(ids)

        def answered() -> set[str]:
            return {
                str(s.message["In-Reply-To"])
                for s in found
                if s.message["In-Reply-To"] in everything
            }

        found = await read_mailbox(mail_server, ALICE)
        try:
            with anyio.fail_after(300):
                while answered() != everything:
                    await anyio.sleep(0.5)
                    found = await read_mailbox(mail_server, ALICE)
        except TimeoutError:
            raise AssertionError(f"answered {len(answered())} of {len(everything)}") from None
        last = make_mail(to=bot, subject="the last one", body="last")
        await inject(mail_server, last, to=bot, sender=ALICE)
        await wait_for(mail_server, ALICE, replies_to(str(last["Message-ID"])), timeout=120)
        found = await read_mailbox(mail_server, ALICE)
        if final.proc.poll() is not None:
            crashes += 1
    replies = Counter(str(s.message["In-Reply-To"]) for s in found)
    counts = Counts("R1", crashes=crashes, extra={"kills": KILLS})
    counts.tally(ids, replies)
    counts.report()
    assert counts.sent == MAILS
    assert counts.lost == 0 and counts.duplicates == 0 and counts.crashes == 0
