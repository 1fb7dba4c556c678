"""Odd mail through `squidd run` on real Dovecot + Postfix: raw 8-bit headers (Latin-1,
cp1252, undeclared UTF-8), a charset that lies, broken encoded-words, a NUL in a header, a
2 MB single-line subject, a From with junk display names, forwarded mail. Each gets exactly
one reply whose subject and body are valid and readable, and the sender's next mail is
answered right after it (one odd mail must never block its sender's conversation).

The mails are put into the bot's mailbox byte for byte (IMAP APPEND: what the provider's
delivery stored); the follow-ups come through Postfix like any mail."""

from __future__ import annotations

import re
from collections import Counter
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.channels.email.mailbox import (
    ALICE,
    DOMAIN,
    MailServer,
    auth_pass,
    imap_session,
    inject,
    make_mail,
    read_mailbox,
    wait_for,
)
from tests.channels.email.test_daemon import write_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow, pytest.mark.timeout(300)]

CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffd]")
CASE_RE = re.compile(r"case-[a-z0-9-]+")


def odd(bot: str, name: str, *, subject: bytes, from_: bytes = b"", extra: bytes = b"") -> bytes:
    """A raw mail from Alice (authenticated by the provider) whose body names its case."""
    sender = from_ or f"Alice <{ALICE}>".encode()
    return (
        f"Authentication-Results: {auth_pass()}\r\n".encode()
        + b"From: "
        + sender
        + f"\r\nTo: {bot}\r\nMessage-ID: <{name}@sender.{DOMAIN}>\r\n".encode()
        + b"Date: Mon, 02 Mar 2026 12:00:00 +0000\r\nSubject: "
        + subject
        + b"\r\n"
        + extra
        + b"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        + f"Please answer case-{name}.\r\n".encode()
    )


def enclosing(bot: str, name: str, content_type: str, parts: list[bytes]) -> bytes:
    """A mail from Alice whose parts (after her own text) are `parts`, as `content_type`."""
    boundary = f"enc-{name}-{len(parts)}"
    body = b"".join(
        f"--{boundary}\r\n".encode()
        + (b"" if content_type == "multipart/digest" else b"Content-Type: message/rfc822\r\n")
        + b"\r\n"
        + part
        + b"\r\n"
        for part in parts
    )
    return (
        (
            f"Authentication-Results: {auth_pass()}\r\nFrom: Alice <{ALICE}>\r\nTo: {bot}\r\n"
            f"Message-ID: <{name}@sender.{DOMAIN}>\r\nSubject: Fwd: {name}\r\n"
            f'MIME-Version: 1.0\r\nContent-Type: {content_type}; boundary="{boundary}"\r\n\r\n'
            f"--{boundary}\r\nContent-Type: text/plain\r\n\r\nPlease answer case-{name}.\r\n"
        ).encode()
        + body
        + f"--{boundary}--\r\n".encode()
    )


def plain(sender: str, subject: str, text: str) -> bytes:
    return (
        f"From: {sender}\r\nDate: Tue, 03 Mar 2026 09:00:00 +0000\r\nSubject: {subject}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\n\r\n{text}\r\n"
    ).encode()


ENCLOSED = {
    "forward-of-forward": [
        ("Bob <bob@example.com>", "Fwd: the plan", "Bob says: see Carol's plan"),
        ("Carol <carol@example.com>", "The plan", "Step one: coffee."),
    ],
    "digest": [
        (f"P{i} <p{i}@example.com>", f"Digest topic {i}", f"Digest text {i}") for i in (1, 2, 3)
    ],
}


def cases(bot: str) -> dict[str, tuple[bytes, str]]:
    """name -> (raw mail, the subject its reply must have)."""
    forwarded = (
        f"Authentication-Results: {auth_pass()}\r\nFrom: Alice <{ALICE}>\r\nTo: {bot}\r\n"
        f"Message-ID: <forwarded@sender.{DOMAIN}>\r\nSubject: Fwd: numbers\r\n"
        'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="f"\r\n\r\n'
        "--f\r\nContent-Type: text/plain\r\n\r\nPlease answer case-forwarded.\r\n"
        "--f\r\nContent-Type: message/rfc822\r\n\r\n"
        "From: Bob <bob@example.com>\r\nSubject: =?iso-8859-1?q?Zahlen_f=FCr_M=E4rz?=\r\n"
        "Content-Type: text/plain; charset=cp1252\r\n\r\nUmsatz \x80 12 Mio.\r\n--f--\r\n"
    ).encode("latin-1")
    big = b"x" * 2_000_000
    return {
        "latin1": (odd(bot, "latin1", subject=b"Caf\xe9 cr\xe8me"), "Re: Caf\u00e9 cr\u00e8me"),
        "cp1252": (
            odd(bot, "cp1252", subject=b"\x93Quote\x94 \x80 5 \x81\x8d"),
            "Re: \u201cQuote\u201d \u20ac 5",
        ),
        "utf8": (odd(bot, "utf8", subject="Gr\u00fc\u00dfe".encode()), "Re: Gr\u00fc\u00dfe"),
        "lying": (odd(bot, "lying", subject=b"=?iso-8859-1?q?caf=C3=A9?="), "Re: caf\u00e9"),
        "broken-words": (
            odd(
                bot,
                "broken-words",
                subject=b"=?utf-8?b?//4=?= =?x-bad?q?ok?= =?utf-8?b?!!!?= =?utf-8?q?open",
            ),
            "Re: \u00ff\u00feok =?utf-8?b?!!!?= =?utf-8?q?open",
        ),
        # Dovecot stores a NUL as 0x80 (read as cp1252's euro sign); squidd drops a NUL
        # it is given (tests/channels/email/test_hostile_text.py).
        "nul": (odd(bot, "nul", subject=b"with\x00nul"), "Re: with\u20acnul"),
        "huge-subject": (odd(bot, "huge-subject", subject=big), "Re: " + "x" * 195 + "\u2026"),
        "junk-name": (
            odd(
                bot,
                "junk-name",
                subject=b"hello",
                from_=b'=?utf-8?b?//4=?= \xff\xfe "=?x?q?a?=" <' + ALICE.encode() + b">",
                extra=b"References: <abc\xff@x> =?utf-8?b?PGFiY++/vUBkPg==?=\r\n",
            ),
            "Re: hello",
        ),
        "forwarded": (forwarded, "Re: Fwd: numbers"),
        "forward-of-forward": (
            enclosing(
                bot,
                "forward-of-forward",
                "multipart/mixed",
                [
                    enclosing(
                        bot, "inner", "multipart/mixed", [plain(*ENCLOSED["forward-of-forward"][1])]
                    )
                    .replace(f"From: Alice <{ALICE}>".encode(), b"From: Bob <bob@example.com>")
                    .replace(b"Subject: Fwd: inner", b"Subject: Fwd: the plan")
                    .replace(b"Please answer case-inner.", b"Bob says: see Carol's plan")
                ],
            ),
            "Re: Fwd: forward-of-forward",
        ),
        "digest": (
            enclosing(bot, "digest", "multipart/digest", [plain(*m) for m in ENCLOSED["digest"]]),
            "Re: Fwd: digest",
        ),
    }


def user_text(request: dict[str, Any]) -> str:
    user = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return user if isinstance(user, str) else " ".join(p.get("text", "") for p in user)


def responder(request: dict[str, Any]) -> Reply:
    """Answers with the case the mail names, and repeats the forwarded mail's sender."""
    text = user_text(request)
    found = CASE_RE.findall(text)
    extra = (
        " (seen: bob, Zahlen f\u00fcr M\u00e4rz, \u20ac 12)"
        if (
            "From: Bob <bob@example.com>" in text
            and "Subject: Zahlen f\u00fcr M\u00e4rz" in text
            and "Umsatz \u20ac 12 Mio." in text
        )
        else ""
    )
    return Reply(content=f"reply to {found[-1] if found else 'nothing'}{extra}")


def ours(message: EmailMessage, bot: str) -> bool:
    """A reply from this test's bot (Alice's mailbox is shared by the tests)."""
    return bot in str(message["From"])


def body_of(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    content = part.get_content()
    assert isinstance(content, str)
    return content.replace("\r\n", "\n")


async def test_odd_mails_get_one_readable_reply_each_and_do_not_block_the_sender(
    mail_server: MailServer, tmp_path: Path
) -> None:
    bot = mail_server.take_bot()
    odd_mails = cases(bot)
    with FakeLLM(responder=responder) as llm:
        config = write_config(tmp_path, mail_server, bot, llm.base_url, rate_limit_count=1000)
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        try:
            await daemon.wait_event("email_connected")
            for name, (raw, _) in odd_mails.items():
                async with imap_session(mail_server, bot) as client:
                    response = await client.append(raw, mailbox="INBOX")
                    assert response.result == "OK", (name, response)
                # The sender's next mail, through Postfix: answered right after.
                follow = make_mail(to=bot, subject=f"after {name}", body=f"case-after-{name}")
                await inject(mail_server, follow, to=bot, sender=ALICE)
            replies = await wait_for(
                mail_server,
                ALICE,
                lambda m: ours(m, bot),
                count=2 * len(odd_mails),
                timeout=240,
            )
            await anyio.sleep(1)  # a bound for a second reply to show up, if there were one
            replies = [s for s in await read_mailbox(mail_server, ALICE) if ours(s.message, bot)]
            by_case = Counter(CASE_RE.findall(body_of(r.message))[0] for r in replies)
            for name, (_, subject) in odd_mails.items():
                assert by_case[f"case-{name}"] == 1, (name, by_case)
                assert by_case[f"case-after-{name}"] == 1, (name, by_case)
                [reply] = [r.message for r in replies if f"case-{name}" in body_of(r.message)]
                assert reply["Subject"] == subject, name
                assert not CONTROLS.search(str(reply["Subject"]) + body_of(reply)), name
            [fwd] = [r.message for r in replies if "case-forwarded" in body_of(r.message)]
            assert "seen: bob" in body_of(fwd)  # the model was shown the enclosed mail
            # The model's input carries each enclosed mail's sender, subject and text.
            shown: dict[str, str] = {}
            for request in llm.chat_requests:
                text = user_text(request)
                for case in CASE_RE.findall(text)[:1]:
                    shown[case] = text
            for name, enclosed in ENCLOSED.items():
                for sender, subject, text in enclosed:
                    for line in (f"From: {sender}", f"Subject: {subject}", text):
                        assert line in shown[f"case-{name}"], (name, line)
            [junk] = [r.message for r in replies if "case-junk-name" in body_of(r.message)]
            assert junk["References"] == f"<junk-name@sender.{DOMAIN}>"
            events = daemon.events()
            # Odd mail never needs the poison parking: no failed attempt, nothing parked.
            assert not [e for e in events if e.get("event") == "parked"]
            assert not [e for e in events if e.get("level") in ("error", "critical")]
            assert daemon.proc.poll() is None
        finally:
            daemon.kill()
