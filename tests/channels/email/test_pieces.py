"""The pieces of the email channel that work on their own, without the mail servers: the
Inbound and prompt built from a parsed mail, the reply threaded from it, the TLS context,
and the acknowledgement's retries when the IMAP server cannot be reached."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from squidd.channels.email.ack import ACK_ATTEMPTS, Acknowledger
from squidd.channels.email.body import Attachment, MailText
from squidd.channels.email.headers import parse_headers
from squidd.channels.email.inbound import make_inbound, oversize_notice, prompt_text, thread_of
from squidd.channels.email.send import send_reply
from squidd.channels.email.smtp import SmtpSender
from squidd.channels.email.state import StateFile
from squidd.channels.email.tls import make_tls_context
from squidd.config.email import EmailSettings
from squidd.core.backoff import Backoff
from squidd.core.models import Outbound, SessionId
from squidd.errors import ConfigError, DeliveryRefusedError, TransientError

HEADERS = (
    b"From: Alice <Alice@Example.org>\r\n"
    b"To: bot@example.org\r\n"
    b"Subject: Lunch?\r\n"
    b"Message-ID: <m2@example.org>\r\n"
    b"In-Reply-To: <m1@example.org>\r\n"
    b"References: <m0@example.org> <m1@example.org>\r\n\r\n"
)


async def _nothing(*_: object) -> None:
    return None


def test_prompt_lists_subject_text_and_attachments_never_their_content() -> None:
    headers = parse_headers(HEADERS)
    body = MailText(
        text="Noon?",
        attachments=(Attachment("menu.pdf", "application/pdf", 2_500_000),),
        from_html=False,
        truncated=False,
    )
    assert prompt_text(headers, body) == (
        "Subject: Lunch?\n\nNoon?\n\n[Attachments, not opened: menu.pdf (application/pdf, 2.5 MB)]"
    )
    empty = MailText(text="", attachments=(), from_html=False, truncated=False)
    assert prompt_text(parse_headers(b"From: a@example.org\r\n\r\n"), empty) == (
        "(no subject)\n\n(no text)"
    )


def test_oversize_notice_tells_the_model_the_mail_was_not_read() -> None:
    notice = oversize_notice(parse_headers(HEADERS), 20_000_000, 10_000_000)
    assert "20.0 MB, over the 10.0 MB size limit" in notice
    assert "Subject: Lunch?." in notice


def test_the_reply_threads_on_what_the_inbound_recorded() -> None:
    headers = parse_headers(HEADERS)
    body = MailText(text="Noon?", attachments=(), from_html=True, truncated=False)
    inbound = make_inbound(
        headers,
        "prompt",
        body,
        ack=_nothing,
        on_undeliverable=_nothing,
    )
    assert (inbound.channel, inbound.sender, inbound.session_id) == (
        "email",
        "alice@example.org",
        "alice@example.org",
    )
    assert inbound.source_id == "<m2@example.org>"
    assert inbound.meta == {
        "message_id": "<m2@example.org>",
        "references": ("<m0@example.org>", "<m1@example.org>"),
        "oversize": False,
    }
    thread = thread_of(inbound)
    assert thread.message_id == "<m2@example.org>"
    assert thread.subject == "Lunch?"
    assert list(thread.references) == ["<m0@example.org>", "<m1@example.org>"]


def test_an_inbound_without_message_id_has_nothing_to_thread_on() -> None:
    headers = parse_headers(b"From: a@example.org\r\nSubject: hi\r\n\r\n")
    inbound = make_inbound(
        headers,
        "prompt",
        None,
        ack=_nothing,
        on_undeliverable=_nothing,
    )
    assert inbound.meta["oversize"] is True
    assert inbound.source_id.startswith("<derived.")
    assert thread_of(inbound).message_id == ""


def test_a_ca_file_that_cannot_be_loaded_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"email\.ca_file"):
        make_tls_context(bad)
    with pytest.raises(ConfigError, match=r"email\.ca_file"):
        make_tls_context(tmp_path / "missing.pem")
    assert make_tls_context(None).verify_mode.name == "CERT_REQUIRED"


def _settings(**overrides: object) -> EmailSettings:
    values: dict[str, object] = {
        "enabled": True,
        "address": "bot@example.org",
        "username": "bot",
        "password": "pw",
        "imap_host": "127.0.0.1",
        "smtp_host": "127.0.0.1",
        "imap_security": "none",
        "smtp_security": "none",
        "timeout_s": 5,
        "trusted_authserv_id": "mx.example.org",
        **overrides,
    }
    return EmailSettings(**values)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_target_that_is_not_an_address_is_refused_for_good() -> None:
    settings = _settings()
    smtp = SmtpSender(settings, make_tls_context(None))
    with pytest.raises(DeliveryRefusedError, match="not an email address"):
        await send_reply(
            Outbound(
                channel="email",
                target="a@b.org, c@d.org",
                text="hi",
                session_id=SessionId("a@b.org"),
            ),
            settings=settings,
            smtp=smtp,
        )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.anyio
async def test_an_ack_the_server_never_takes_is_retried_then_left_pending(
    tmp_path: Path,
) -> None:
    """The IMAP server cannot be reached: the flag is tried ACK_ATTEMPTS times, then the ack
    fails as transient, the mail stays pending, and the receive loop may hand it on
    again (it left the set of mail handed on by this process)."""
    settings = _settings(imap_port=_closed_port())
    state = StateFile(tmp_path / "state.json")
    state.state.uidvalidity = 42
    state.state.pending = {7}
    delivered = {7}
    acks = Acknowledger(settings, make_tls_context(None), state, delivered, retry=Backoff(0.0, 0.0))
    with capture_logs() as logs, pytest.raises(TransientError):
        await acks.ack(42, 7)
    retries = [e for e in logs if e["event"] == "email_ack_retry"]
    assert [e["attempt"] for e in retries] == list(range(1, ACK_ATTEMPTS + 1))
    assert delivered == set()
    assert state.state.pending == {7}
    await acks.close()
