"""R4, mail: malformed and nested MIME, a 20 MB mail, invalid UTF-8 and unknown charsets, a
spoofed From, auto-replies and bounces, put into the bot's real mailbox (Dovecot). Each is
answered once or deliberately left unanswered; no crash and no error-level log line."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.channels.email.mailbox import (
    ALICE,
    DOMAIN,
    MailServer,
    auth_pass,
    bot_email_section,
    imap_session,
    make_mail,
    read_mailbox,
    replies_for_alice,
)
from tests.faults.harness import Counts
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow, pytest.mark.timeout(300)]


def raw(bot: str, mid: str, headers: str, body: bytes, *, auth: bool = True) -> bytes:
    head = f"From: {ALICE}\r\nTo: {bot}\r\nMessage-ID: {mid}\r\nSubject: hostile\r\n"
    if auth:
        head = f"Authentication-Results: {auth_pass()}\r\n" + head
    return (head + headers).encode() + b"\r\n" + body


def hostile(bot: str) -> list[tuple[str, bool, bytes]]:
    """(message id, answered?, raw mail)."""
    cases: list[tuple[str, bool, bytes]] = []

    def add(name: str, answered: bool, headers: str, body: bytes, auth: bool = True) -> None:
        mid = f"<{name}.{len(cases)}@sender.{DOMAIN}>"
        cases.append((mid, answered, raw(bot, mid, headers, body, auth=auth)))

    add("no-boundary", True, 'Content-Type: multipart/mixed; boundary="b"\r\n', b"no parts\r\n")
    nested = b"".join(
        b'--b%d\r\nContent-Type: multipart/mixed; boundary="b%d"\r\n\r\n' % (i, i + 1)
        for i in range(60)
    )
    add("nested", True, 'Content-Type: multipart/mixed; boundary="b0"\r\n', nested + b"deep\r\n")
    add("bad-utf8", True, "Content-Type: text/plain; charset=utf-8\r\n", b"caf\xe9 \xff\xfe\r\n")
    add("bad-charset", True, "Content-Type: text/plain; charset=x-nonsense\r\n", b"hello\r\n")
    add(
        "bad-base64",
        True,
        "Content-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n",
        b"!!!not base64===\r\n",
    )
    add("nul", True, "Content-Type: text/plain\r\n", b"a\x00b\x00c\r\n")
    add("encoded-word", True, "X-Junk: =?utf-8?b?////?=\r\n", b"hi\r\n")
    add("empty", True, "Content-Type: text/plain\r\n", b"")
    # 20 MB, past the size limit: answered with the limit's short notice.
    add("huge", True, "Content-Type: text/plain\r\n", (b"B" * 998 + b"\r\n") * 20_500)
    add("spoofed", False, "Content-Type: text/plain\r\n", b"I am alice\r\n", auth=False)
    add("auto-reply", False, "Auto-Submitted: auto-replied\r\n", b"out of office\r\n")
    add("bulk", False, "Precedence: bulk\r\n", b"newsletter\r\n")
    add(
        "bounce",
        False,
        'Content-Type: multipart/report; report-type=delivery-status; boundary="r"\r\n',
        b"--r\r\nContent-Type: text/plain\r\n\r\nundeliverable\r\n--r--\r\n",
    )
    return cases


async def test_hostile_mail_is_answered_once_or_left_alone(
    mail_server: MailServer, tmp_path: Path
) -> None:
    bot = mail_server.take_bot()
    cases = hostile(bot)
    with FakeLLM() as llm:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-faults-r4-mail",
            email=bot_email_section(mail_server, bot, rate_limit_count=1000),
        )
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        try:
            await daemon.wait_event("email_connected")
            async with imap_session(mail_server, bot) as client:
                for _, _, mail in cases:
                    response = await client.append(mail, mailbox="INBOX")
                    assert response.result == "OK", response
            last = make_mail(to=bot, subject="the last one")
            async with imap_session(mail_server, bot) as client:
                await client.append(last.as_bytes(), mailbox="INBOX")
            await replies_for_alice(mail_server, str(last["Message-ID"]), timeout=120)
            found = await read_mailbox(mail_server, ALICE)
            replies = Counter(str(s.message["In-Reply-To"]) for s in found)
            expected = [mid for mid, answered, _ in cases if answered]
            silent = [mid for mid, answered, _ in cases if not answered]
            events = daemon.events()
            errors = [e for e in events if e.get("level") in ("error", "critical")]
            counts = Counts("R4 mail", extra={"silent_ok": sum(replies[m] == 0 for m in silent)})
            counts.tally(expected, replies)
            counts.sent = len(cases)
            counts.crashes = (daemon.proc.poll() is not None) + sum(
                e.get("event") == "turn_crashed" for e in events
            )
            counts.report()
            assert counts.lost == 0 and counts.duplicates == 0 and counts.crashes == 0, replies
            assert all(replies[m] == 0 for m in silent), {m: replies[m] for m in silent}
            assert errors == [], errors[:3]
        finally:
            daemon.kill()
