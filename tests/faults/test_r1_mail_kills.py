"""R1: 100 mails from an allowed sender while the daemon is SIGKILLed at random moments (at
least 5 times) and restarted, against real Dovecot + Postfix: each mail is answered exactly
once (a reply sent again with its own Message-ID after a kill that landed between the SMTP
server's acceptance and the handled record is the same mail, counted apart as
`resent_same_id`). A last mail, answered after all of them, shows no late second answer is
still coming. The kill moments are drawn from the seed (`tests/faults/harness.py`)."""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from pathlib import Path

import anyio
import pytest

from tests.channels.email.mailbox import (
    ALICE,
    MailServer,
    Stored,
    bot_email_section,
    inject,
    make_mail,
    read_mailbox,
    replies_for_alice,
)
from tests.faults.harness import Counts, seeded
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow, pytest.mark.timeout(600)]

MAILS = 100
KILLS = 5


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
        await replies_for_alice(mail_server, str(last["Message-ID"]), timeout=120)
        found = await read_mailbox(mail_server, ALICE)
        if final.proc.poll() is not None:
            crashes += 1
    replies, resent = distinct_replies(found, everything)
    counts = Counts("R1", crashes=crashes, extra={"kills": KILLS, "resent_same_id": resent})
    counts.tally(ids, replies)
    counts.report()
    assert counts.sent == MAILS
    assert counts.lost == 0 and counts.duplicates == 0 and counts.crashes == 0


async def test_a_reply_the_server_took_just_before_a_kill_is_sent_again_as_the_same_mail(
    mail_server: MailServer,
    tmp_path: Path,
    daemons: list[DaemonProcess],
) -> None:
    """The window R1's kills can land in, made certain: the handled record is replaced by a
    FIFO, so the daemon's write of it blocks right after the SMTP server accepted the reply.
    Killed there and restarted, the daemon sends the reply again: the same Message-ID and
    text (one mail to the recipient), counted as `resent_same_id`, not as a duplicate."""
    bot = mail_server.take_bot()
    with FakeLLM(responder=echo) as llm:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-faults-r1-0002",
            email=bot_email_section(mail_server, bot),
        )
        first = DaemonProcess(config, tmp_path / "daemon-0.log")
        daemons.append(first)
        await first.wait_event("daemon_ready")
        handled = tmp_path / "data" / "gateway" / "handled.jsonl"
        handled.parent.mkdir(parents=True, exist_ok=True)
        kept = handled.with_name("handled.kept")
        if handled.exists():
            handled.rename(kept)
        os.mkfifo(handled)  # opening it to append blocks until a reader comes: none will
        mail = make_mail(to=bot, subject="once", body="answer me once")
        question = str(mail["Message-ID"])
        await inject(mail_server, mail, to=bot, sender=ALICE)
        await replies_for_alice(mail_server, question, timeout=120)
        first.kill()  # the reply is out; its handled record and the \Seen flag are not
        handled.unlink()
        if kept.exists():
            kept.rename(handled)
        second = DaemonProcess(config, tmp_path / "daemon-1.log")
        daemons.append(second)
        await replies_for_alice(mail_server, question, count=2, timeout=120)
        later = make_mail(to=bot, subject="later", body="and this one")
        await inject(mail_server, later, to=bot, sender=ALICE)
        await replies_for_alice(mail_server, str(later["Message-ID"]), timeout=120)
        found = await read_mailbox(mail_server, ALICE)
    replies, resent = distinct_replies(found, {question, str(later["Message-ID"])})
    assert replies == Counter({question: 1, str(later["Message-ID"]): 1})
    assert resent == 1
    copies = [s.message for s in found if s.message["In-Reply-To"] == question]
    assert len(copies) == 2 and copies[0]["Message-ID"] == copies[1]["Message-ID"]


def distinct_replies(found: list[Stored], asked: set[str]) -> tuple[Counter[str], int]:
    """Per mail asked, how many different replies reached the sender (by the reply's own
    Message-ID), and how many copies were the same reply sent again.

    A kill after the SMTP server accepted a reply and before the handled record was written
    makes the outbox send that reply again after the restart: the same mail, with the same
    Message-ID (derived from the question's) and the same text, which the recipient's mail
    client shows once. No protocol lets a client learn that its last message was accepted
    before the connection died, so this window cannot be closed; it is counted here apart
    from a real duplicate (a second, different answer), which fails the scenario."""
    copies: dict[str, list[Stored]] = defaultdict(list)
    for stored in found:
        question = str(stored.message["In-Reply-To"])
        if question in asked:
            copies[question].append(stored)
    distinct: Counter[str] = Counter()
    resent = 0
    for question, replies in copies.items():
        by_id: dict[str, list[str]] = defaultdict(list)
        for stored in replies:
            body = stored.message.get_body(preferencelist=("plain",))
            text = body.get_content() if body is not None else ""
            by_id[str(stored.message["Message-ID"])].append(str(text))
        for texts in by_id.values():
            assert len(set(texts)) == 1, f"one Message-ID, different texts: {texts}"
            resent += len(texts) - 1
        distinct[question] = len(by_id)
    return distinct, resent
