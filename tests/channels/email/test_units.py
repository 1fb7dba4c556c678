"""The email channel's pure parts, without servers: the decisions on who is answered, the
parsing edge cases, the reply headers, settings validation and the state file's name."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiosmtplib import (
    SMTPDataError,
    SMTPHeloError,
    SMTPRecipientRefused,
    SMTPRecipientsRefused,
    SMTPSenderRefused,
    SMTPServerDisconnected,
)

from squidd.channels.email.body import extract_text
from squidd.channels.email.compose import ThreadContext, build_message, reply_subject
from squidd.channels.email.errors import smtp_error
from squidd.channels.email.headers import parse_headers
from squidd.channels.email.policy import (
    Gate,
    RateLimiter,
    authentication_failure,
    parse_auth_results,
)
from squidd.channels.email.quoting import trim_reply
from squidd.channels.email.send import tagged_address
from squidd.channels.email.state import StateFile, state_path
from squidd.config.email import EmailSettings
from squidd.errors import DeliveryError, DeliveryRefusedError


def headers(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_auth_results_parsing_tolerates_comments_and_versions() -> None:
    server, results = parse_auth_results(
        "mx.example.org 1; (a comment) dkim=pass (good sig) header.d=example.org "
        'header.s="s1"; dmarc=pass (p=reject) header.from=Example.org'
    )
    assert server == "mx.example.org"
    assert [(r.method, r.result) for r in results] == [("dkim", "pass"), ("dmarc", "pass")]
    assert results[0].props["header.d"] == "example.org"
    assert results[1].props["header.from"] == "example.org"


@pytest.mark.parametrize(
    ("results", "verdict"),
    [
        (["mx.t; dmarc=pass header.from=example.org"], None),
        (["mx.t; dkim=pass header.d=example.org"], None),
        (["mx.t; dkim=pass header.d=mail.example.org"], None),  # relaxed alignment
        (["mx.t; dkim=pass header.i=@example.org"], None),
        (["mx.t; dkim=pass header.d=org"], "no_dmarc_or_aligned_dkim_pass"),
        (["mx.t; dkim=pass header.d=example.org.evil.test"], "no_dmarc_or_aligned_dkim_pass"),
        (["mx.t; dmarc=pass header.from=evil.test"], "no_dmarc_or_aligned_dkim_pass"),
        (["mx.t; spf=pass smtp.mailfrom=example.org"], "no_dmarc_or_aligned_dkim_pass"),
        (["mx.t; dkim=pass header.d=example.org; dmarc=fail"], "dmarc_fail"),
        (["mx.evil; dmarc=pass"], "no_trusted_authentication_results"),
        ([], "no_trusted_authentication_results"),
        # a forged "pass" lower down does not outvote the trusted server's "fail"
        (["mx.t; dmarc=fail", "mx.t; dmarc=pass"], "dmarc_fail"),
        (
            [
                "mx.t; dkim=fail header.d=example.org; dmarc=none",
                "mx.t; dkim=pass header.d=example.org",
            ],
            "dkim_fail",
        ),
        # split setups: one field for DKIM, one for DMARC, both from the trusted server
        (["mx.t; dmarc=none", "mx.t; dkim=pass header.d=example.org"], None),
    ],
)
def test_authentication_verdicts(results: list[str], verdict: str | None) -> None:
    lines = [f"Authentication-Results: {r}" for r in results]
    parsed = parse_headers(headers(*lines, "From: Someone <someone@Example.org>"))
    assert authentication_failure(parsed, "MX.t") == verdict
    assert authentication_failure(parsed, "mx.other, MX.t") == verdict


FORGED = "Authentication-Results: mx.t; dkim=pass header.d=example.org; dmarc=pass"


@pytest.mark.parametrize(
    ("lines", "verdict"),
    [
        # the sender's own header block, below the hop that brought it in, is not trusted
        (
            [
                "Authentication-Results: mx.t; dkim=none; dmarc=none",
                "Received: from attacker.test by mx.t",
                FORGED,
            ],
            "no_dmarc_or_aligned_dkim_pass",
        ),
        # a local delivery hop on top does not hide the border server's verdict
        (
            [
                "Received: from mx.t by imap.t with LMTP",
                "Authentication-Results: mx.t; dmarc=pass header.from=example.org",
                "Received: from sender.example.org by mx.t",
                "Authentication-Results: mx.t; dmarc=fail",
            ],
            None,
        ),
    ],
)
def test_only_the_receiving_servers_block_counts(lines: list[str], verdict: str | None) -> None:
    parsed = parse_headers(headers(*lines, "From: Someone <someone@example.org>"))
    assert authentication_failure(parsed, "mx.t") == verdict


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ("Auto-Submitted: auto-generated", "auto_submitted"),
        ("Auto-Submitted: no", None),
        ("Precedence: list", "precedence_list"),
        ("Precedence: junk", "precedence_junk"),
        ("List-Id: <x.example.org>", "mailing_list"),
        ("Return-Path: <>", "null_return_path"),
        ("X-Autoreply: yes", "autoreply_header"),
        ("Content-Type: multipart/report; report-type=delivery-status", "delivery_report"),
    ],
)
def test_loop_protection(extra: str, reason: str | None) -> None:
    gate = Gate("bot@example.org", ["a@example.org"], [], False, "")
    parsed = parse_headers(headers("From: a@example.org", extra))
    assert gate.reason_to_ignore(parsed) == reason


@pytest.mark.parametrize(
    "sender",
    [
        "MAILER-DAEMON@example.org",
        "no-reply@example.org",
        "noreply+x@example.org",
        "BOT@example.org",
    ],
)
def test_robots_and_ourselves_are_never_answered(sender: str) -> None:
    gate = Gate("bot@example.org", [], ["example.org"], False, "")
    assert gate.reason_to_ignore(parse_headers(headers(f"From: {sender}"))) is not None


def test_allowlist_is_default_deny_and_matches_addresses_and_domains() -> None:
    def reason(gate: Gate, sender: str) -> str | None:
        return gate.reason_to_ignore(parse_headers(headers(f"From: {sender}")))

    nobody = Gate("bot@x.org", [], [], False, "")
    assert reason(nobody, "a@example.org") == "not_allowlisted"
    some = Gate("bot@x.org", ["a@example.org"], ["friends.org"], False, "")
    assert reason(some, "A@Example.org") is None
    assert reason(some, "b@friends.org") is None
    assert reason(some, "b@sub.friends.org") == "not_allowlisted"
    assert reason(some, "b@example.org") == "not_allowlisted"
    two_from = parse_headers(headers("From: a@example.org, b@friends.org"))
    assert some.reason_to_ignore(two_from) == "several_from_addresses"


def test_rate_limit_per_sender_with_a_sliding_window() -> None:
    now = [0.0]
    limiter = RateLimiter(2, 60, clock=lambda: now[0])
    for _ in range(2):
        assert limiter.allows("a@x")
        limiter.record("a@x")
    assert not limiter.allows("a@x")
    assert limiter.allows("b@x")
    assert limiter.wait_s("b@x") == 0
    now[0] = 10
    assert limiter.wait_s("a@x") == 50  # the channel sleeps that long before re-checking
    now[0] = 61
    assert limiter.allows("a@x")
    assert limiter.wait_s("a@x") == 0


def test_quoted_history_and_signatures_are_trimmed_forwards_kept() -> None:
    text = (
        "Sounds good, see you.\n\n"
        "On Mon, 2 Mar 2026 at 12:00, Bob <bob@example.org> wrote:\n"
        "> Lunch tomorrow?\n> \n"
        "-- \nAlice\n"
    )
    assert trim_reply(text) == "Sounds good, see you."
    outlook = "Yes.\n\n________________________________\nFrom: Bob\nSent: Monday\nold"
    assert trim_reply(outlook) == "Yes."
    original = "Fine.\n-----Original Message-----\nFrom: Bob\nold"
    assert trim_reply(original) == "Fine."
    forward = "Please read this:\n\n---------- Forwarded message ---------\nFrom: x\nthe content"
    assert "the content" in trim_reply(forward)
    assert trim_reply("> only a quote") == "> only a quote"


@pytest.mark.timeout(60)  # a bound for the broken (quadratic) version, not a speed check
def test_many_attribution_lines_do_not_stall_the_parser() -> None:
    # ~2.6 MB, under the default size cap: each "wrote:" line once looked at every line
    # after it, so a mail like this kept the receive loop busy for hours.
    body = "Alice wrote:\n" * 200_000 + "the end\n"
    raw = ("From: a@example.org\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body).encode()
    text = extract_text(raw, max_chars=100).text
    assert text.startswith("Alice wrote:")
    assert "truncated" in text


def test_text_is_capped_and_attachments_are_listed_not_read() -> None:
    raw = (
        b"From: a@example.org\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + b"word " * 100 + b"\r\n"
        b"--b\r\nContent-Type: image/png\r\n"
        b"Content-Disposition: attachment; filename*=utf-8''K%C3%B6ln.png\r\n"
        b"Content-Transfer-Encoding: base64\r\n\r\niVBORw0KGgo=\r\n--b--\r\n"
    )
    body = extract_text(raw, max_chars=50)
    assert body.truncated
    assert len(body.text) < 120
    assert "truncated" in body.text
    assert [(a.name, a.content_type, a.size) for a in body.attachments] == [
        ("Köln.png", "image/png", 8)
    ]


def test_message_id_missing_gives_a_stable_derived_id() -> None:
    block = headers("From: a@example.org", "Subject: no id")
    one, two = parse_headers(block), parse_headers(block)
    assert not one.has_message_id
    assert one.message_id == two.message_id
    assert one.message_id.startswith("<derived.")


def test_reply_subject_is_not_doubled() -> None:
    assert reply_subject("Hello") == "Re: Hello"
    assert reply_subject("Re: Hello") == "Re: Hello"
    assert reply_subject("RE: re[2]: AW: Hello") == "Re: Hello"
    assert reply_subject("") == "Re: your message"


def test_a_message_without_thread_is_auto_generated_and_a_reply_without_id_not_threaded() -> None:
    fresh = build_message(
        from_addr="bot@example.org",
        from_name="squidd",
        to_addr="a@example.org",
        text="Reminder",
        thread=None,
        subject="Your reminder",
    )
    assert fresh["Auto-Submitted"] == "auto-generated"
    assert fresh["Subject"] == "Your reminder"
    assert fresh["In-Reply-To"] is None
    reply = build_message(
        from_addr="bot@example.org",
        from_name="squidd",
        to_addr="a@example.org",
        text="ok",
        thread=ThreadContext("<derived.1@squidd.invalid>", "", "hi", ()),
    )
    assert reply["In-Reply-To"] is None and reply["References"] is None
    assert reply["Auto-Submitted"] == "auto-replied"


def test_a_mail_to_a_tag_is_answered_with_the_tag_as_reply_to() -> None:
    """Mail to bot+work@ (the work agent) is answered with Reply-To bot+work@, so the
    person's reply stays with that agent; From stays the account's address."""
    own = "Bot@Example.org"
    assert tagged_address(("a@example.org", "bot+work@example.org"), own) == (
        "bot+work@example.org"
    )
    for recipients in [("bot@example.org",), ("bot+@example.org",), ("bob+work@example.org",)]:
        assert tagged_address(recipients, own) == "", recipients
    assert tagged_address(("bot+work@other.org",), own) == ""
    reply = build_message(
        from_addr="bot@example.org",
        from_name="squidd",
        to_addr="a@example.org",
        text="ok",
        thread=ThreadContext("<m1@example.org>", "<m1@example.org>", "hi", ()),
        reply_to="bot+work@example.org",
    )
    assert (reply["From"].addresses[0].addr_spec, reply["Reply-To"]) == (
        "bot@example.org",
        "bot+work@example.org",
    )
    plain = build_message(
        from_addr="bot@example.org", from_name="", to_addr="a@example.org", text="x", thread=None
    )
    assert plain["Reply-To"] is None


def test_html_part_is_sanitised() -> None:
    msg = build_message(
        from_addr="bot@example.org",
        from_name="",
        to_addr="a@example.org",
        text="hi <script>alert(1)</script> [x](javascript:alert(1))",
        thread=None,
    )
    html = msg.get_body(preferencelist=("html",))
    assert html is not None
    assert "<script>" not in html.get_content()
    assert 'href="javascript' not in html.get_content()


@pytest.mark.parametrize(
    "account", ["../../etc/passwd", "a/b@c", "..", "x" * 500, "ünï@cödé", "a\x00b"]
)
def test_state_file_stays_in_the_data_dir(tmp_path: Path, account: str) -> None:
    path = state_path(tmp_path, account, "../../INBOX")
    assert path.parent == tmp_path / "email"
    assert path.resolve().is_relative_to(tmp_path.resolve())
    assert len(path.name) < 120


def test_settings_require_the_trusted_server_unless_switched_off() -> None:
    base = {
        "enabled": True,
        "address": "bot@example.org",
        "username": "bot",
        "password": "pw",
        "imap_host": "imap.example.org",
        "smtp_host": "smtp.example.org",
    }
    with pytest.raises(ValueError, match="trusted_authserv_id"):
        EmailSettings(**base)
    assert EmailSettings(**base, require_authentication=False).imap_security == "tls"
    settings = EmailSettings(**base, trusted_authserv_id="mx.example.org")
    assert settings.smtp_security == "tls" and settings.smtp_login is not None
    no_user = {k: v for k, v in base.items() if k != "username"}
    assert EmailSettings(**no_user, require_authentication=False).username == "bot@example.org"
    with pytest.raises(ValueError):
        EmailSettings(**base, trusted_authserv_id="mx", idle_renew_s=30 * 60)


def test_huge_html_mail_is_cut_before_conversion() -> None:
    """Only what can reach the prompt is converted: a multi-megabyte HTML body is cut first."""
    paragraph = "<p>" + "word " * 40 + "</p>"
    html = "<html><body>" + paragraph * 40_000 + "</body></html>"  # about 8.6 MB
    raw = (
        "From: a@example.org\r\nTo: b@example.org\r\nSubject: big\r\n"
        "Content-Type: text/html; charset=utf-8\r\n\r\n" + html
    ).encode()
    body = extract_text(raw, max_chars=2_000)
    assert body.from_html and body.truncated
    assert body.text.startswith("word word")
    assert len(body.text) < 2_200


def test_a_subject_whose_encoded_words_do_not_decode_is_read_as_far_as_it_goes() -> None:
    """Not `Re: \ufffd\ufffd =?utf-8?Q?unterminated ...`: bytes that are not the declared
    UTF-8 are read as cp1252, a word never closed stays the raw text a person can read, and
    a raw 8-bit subject in Latin-1 is read as such."""
    broken = parse_headers(
        b"From: a@x.org\r\nSubject: =?utf-8?B?gIA=?= =?utf-8?Q?unterminated ...\r\n\r\n"
    )
    assert broken.subject == "\u20ac\u20ac =?utf-8?Q?unterminated ..."
    assert reply_subject(broken.subject) == "Re: \u20ac\u20ac =?utf-8?Q?unterminated ..."
    latin = parse_headers(b"From: a@x.org\r\nSubject: caf\xe9 au lait\r\n\r\n")
    assert latin.subject == "caf\xe9 au lait"
    fine = parse_headers(b"From: a@x.org\r\nSubject: =?utf-8?Q?caf=C3=A9?= ok\r\n\r\n")
    assert fine.subject == "caf\xe9 ok"


HEAD = b"From: a@x.org\r\nSubject: s\r\nMIME-Version: 1.0\r\n"


@pytest.mark.parametrize(
    "raw",
    [
        # the declared boundary is not the one the body uses
        HEAD + b'Content-Type: multipart/mixed; boundary="declared"\r\n\r\n'
        b"--used\r\nContent-Type: text/plain\r\n\r\nPlease call me at noon.\r\n"
        b"--used\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        b"JVBERi0xLjQK\r\n--used--\r\n",
        # no boundary declared at all
        HEAD + b"Content-Type: multipart/alternative\r\n\r\n"
        b"--b1\r\nContent-Type: text/plain\r\n\r\nPlease call me at noon.\r\n--b1--\r\n",
        # a "base64" text part that is plain text
        HEAD + b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        b"Please call me at noon.\r\n--b--\r\n",
    ],
    ids=["boundary_mismatch", "boundary_missing", "fake_base64"],
)
def test_broken_mime_gives_the_readable_text_not_decoder_junk(raw: bytes) -> None:
    text = extract_text(raw, max_chars=1000).text
    assert text == "Please call me at noon."


@pytest.mark.parametrize(
    ("exc", "refused"),
    [
        (SMTPRecipientsRefused([SMTPRecipientRefused(550, "no such user", "x@y.org")]), True),
        (SMTPRecipientsRefused([SMTPRecipientRefused(450, "mailbox busy", "x@y.org")]), False),
        (SMTPDataError(552, "message too large"), True),
        (SMTPDataError(554, "content rejected"), True),
        (SMTPDataError(451, "local error, try later"), False),
        (SMTPSenderRefused(552, "size over the limit", "bot@x.org"), True),
        (SMTPSenderRefused(553, "not owned by user", "bot@x.org"), False),
        (SMTPHeloError(554, "no"), False),
        (SMTPServerDisconnected("gone"), False),
    ],
)
def test_smtp_failures_are_split_into_refused_for_good_and_worth_retrying(
    exc: Exception, refused: bool
) -> None:
    """A 5xx for this recipient or this mail ends the delivery; 4xx, connection trouble and
    setup problems (every reply alike, a human fixes them) are retried."""
    error = smtp_error(exc)
    assert isinstance(error, DeliveryRefusedError) is refused
    assert isinstance(error, DeliveryError) is not refused


def test_rate_limit_counts_are_kept_bounded_and_survive_a_snapshot() -> None:
    now = [1_000.0]
    limiter = RateLimiter(2, 60, clock=lambda: now[0], max_senders=3)
    for _ in range(5):
        limiter.record("a@x")
    assert limiter.snapshot() == {"a@x": [1_000.0, 1_000.0]}  # only what the window needs
    later = RateLimiter(2, 60, clock=lambda: now[0], max_senders=3)
    later.restore(limiter.snapshot())
    assert not later.allows("a@x")
    for n, sender in enumerate(["b@x", "c@x", "d@x"]):
        now[0] += 1 + n
        later.record(sender)
    assert sorted(later.snapshot()) == ["b@x", "c@x", "d@x"]  # the oldest sender went first
    # a time ahead of the clock (the clock was set back) holds a sender one window at most
    back = RateLimiter(1, 60, clock=lambda: 0.0)
    back.restore({"a@x": [10_000.0]})
    assert back.wait_s("a@x") == 60
    # expired counts are dropped on restore; junk in the state file is not loaded
    expired = RateLimiter(1, 60, clock=lambda: 10_000.0)
    expired.restore({"a@x": [1.0]})
    assert expired.snapshot() == {}


@pytest.mark.anyio
async def test_state_file_keeps_the_rate_counts(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = StateFile(path)
    await state.load()
    state.state.rate = {"a@x": [1.5, 2.5]}
    await state.save()
    again = StateFile(path)
    assert (await again.load()).rate == {"a@x": [1.5, 2.5]}
    path.write_text('{"rate": {"a@x": ["no", 1e999, 3], "b@x": 7, "c@x": []}}')
    assert (await StateFile(path).load()).rate == {"a@x": [3.0]}
