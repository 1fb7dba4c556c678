"""Odd mail read as valid text, and replies to it with valid headers (no servers).

Every header and body string that leaves the parser is valid Unicode without controls,
whatever the mail's charsets claim; a reply to it serialises under `email.policy.SMTP`, and
its recipient reads back the subject it was meant to have."""

from __future__ import annotations

import base64
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squidd.channels.email.body import extract_text
from squidd.channels.email.charsets import decode, header_text, printable
from squidd.channels.email.compose import ThreadContext, build_message, encoded_words
from squidd.channels.email.headers import parse_headers, valid_msgids
from squidd.channels.email.inbound import prompt_text
from squidd.channels.email.policy import Gate

CONTROLS = {chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}


def head(*lines: bytes) -> bytes:
    return (
        b"\r\n".join([b"From: Alice <alice@example.org>", b"Message-ID: <m1@example.org>", *lines])
        + b"\r\n\r\n"
    )


def readable(text: str) -> bool:
    text.encode("utf-8")  # raises on a surrogate
    return not (set(text) & CONTROLS)


def reply_to(raw: bytes, text: str = "ok") -> tuple[EmailMessage, bytes]:
    h = parse_headers(raw)
    thread = ThreadContext(
        source_id=h.message_id,
        message_id=h.message_id if h.has_message_id else "",
        subject=h.subject,
        references=h.references,
    )
    msg = build_message(
        from_addr="bot@example.net",
        from_name="Bot",
        to_addr="alice@example.org",
        text=text,
        thread=thread,
    )
    wire = msg.as_bytes(policy=policy.SMTP)
    back = BytesParser(policy=policy.default).parsebytes(wire)
    assert isinstance(back, EmailMessage)
    return back, wire


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        (b"caf\xe9 cr\xe8me", "caf\u00e9 cr\u00e8me"),  # raw Latin-1
        (b"\x93quoted\x94 \x80 5", "\u201cquoted\u201d \u20ac 5"),  # raw cp1252
        ("Gr\u00fc\u00dfe \u65e5\u672c".encode(), "Gr\u00fc\u00dfe \u65e5\u672c"),  # raw UTF-8
        (b"=?iso-8859-1?q?caf=C3=A9?=", "caf\u00e9"),  # Latin-1 declared, UTF-8 inside
        (b"=?utf-8?q?caf=E9?=", "caf\u00e9"),  # UTF-8 declared, Latin-1 inside
        (b"=?utf-8?b?//4=?=", "\u00ff\u00fe"),  # bytes that are no UTF-8
        (b"=?x-no-such-charset?q?hello_there?=", "hello there"),
        (b"=?utf-8?b?!!!not base64?= tail", "=?utf-8?b?!!!not base64?= tail"),
        (b"=?utf-8?q?never closed", "=?utf-8?q?never closed"),
        (b"=?utf-8?b?4pyT?= =?utf-8?b?IGRvbmU=?=", "\u2713 done"),  # space between words dropped
        (b"=?utf-8?q?=E2=9C?= =?utf-8?q?=93?=", "\u2713"),  # a character split over two words
        (b"=?utf-8*en?q?lang_tag?=", "lang tag"),
        (b"a\x00b\x01c\x1bd \x81\x8d\x9d e", "abcd e"),  # NUL, controls, C1 dropped
        (b"=?utf-8?q?nul=00and=C2=85next?=", "nulandnext"),
        (b"=?gb2312?b?1tDOxA==?=", "\u4e2d\u6587"),
        (b"line one\r\n\tline two", "line one line two"),
    ],
)
def test_subjects_in_any_charset_are_read_as_valid_text(subject: bytes, expected: str) -> None:
    parsed = parse_headers(head(b"Subject: " + subject))
    assert parsed.subject == expected
    back, _ = reply_to(head(b"Subject: " + subject))
    assert back["Subject"] == ("Re: " + expected if expected else "Re: your message")


def test_text_that_looks_like_an_encoded_word_reaches_the_recipient_as_itself() -> None:
    """The reported failure: the reply re-decoded the subject's lookalike word into
    surrogates. Encoded as a whole, it reads back exactly."""
    raw = head(b"Subject: =?utf-8?q?=3D=3Futf-8=3Fb=3F=2F=2F4=3D=3F=3D?=")
    assert parse_headers(raw).subject == "=?utf-8?b?//4=?="
    back, wire = reply_to(raw)
    assert back["Subject"] == "Re: =?utf-8?b?//4=?="
    assert wire.isascii()


def test_junk_display_names_and_8bit_addresses() -> None:
    raw = b'From: =?utf-8?b?//4=?= \xff\xfe "q\\"x" <Alice@Example.org>\r\nSubject: s\r\n\r\n'
    parsed = parse_headers(raw)
    assert parsed.from_addr == "alice@example.org"
    assert readable(parsed.from_name) and parsed.from_name
    utf8_addr = parse_headers("From: J\u00f6rg <j\u00f6rg@example.org>\r\n\r\n".encode())
    assert utf8_addr.from_addr == "j\u00f6rg@example.org"
    assert utf8_addr.from_name == "J\u00f6rg"
    # a display name cannot pose as the address
    posing = parse_headers(b"From: =?utf-8?q?alice=40example.org?= <eve@evil.example>\r\n\r\n")
    assert posing.from_addr == "eve@evil.example"
    # an address with a NUL in it is no address (not a cleaned one that matches another)
    nul = parse_headers(b"From: <ali\x00ce@example.org>\r\n\r\n")
    assert nul.from_addr == ""


def test_a_huge_from_is_not_read_and_a_huge_subject_is_capped() -> None:
    junk = b"=?utf-8?b?//4=?= \xff junk " * 100_000
    parsed = parse_headers(
        b"From: " + junk + b"<alice@example.org>\r\nSubject: " + b"x" * 2_000_000 + b"\r\n\r\n"
    )
    assert parsed.from_too_long and parsed.from_addr == "" and parsed.from_count == 0
    assert len(parsed.subject) <= 1000 and parsed.subject.endswith("\u2026")


def test_only_valid_message_ids_are_threaded_on() -> None:
    raw = head(
        b"References: <abc\xff@d.example> =?utf-8?b?PGFiY++/vUBkPg==?= <ok@e.example>"
        b" <no-at-sign> <sp ace@x.example> <ok2@[127.0.0.1]>",
        b"In-Reply-To: <ok@e.example>",
        b"Subject: s",
    )
    parsed = parse_headers(raw)
    assert parsed.references == ("<ok@e.example>", "<ok2@[127.0.0.1]>")
    back, wire = reply_to(raw)
    assert back["In-Reply-To"] == "<m1@example.org>"
    assert back["References"] == "<ok@e.example> <ok2@[127.0.0.1]> <m1@example.org>"
    assert b"=?" not in wire.split(b"\r\n\r\n")[0].split(b"References:")[1].split(b"\r\n")[0]
    assert valid_msgids("<a@b> <=?utf-8?q?x?=@y>") == ("<a@b>",)


def test_a_message_id_that_is_not_valid_is_kept_as_the_id_but_not_threaded_on() -> None:
    parsed = parse_headers(b"From: a@x.org\r\nMessage-ID: <junk\xff id>\r\n\r\n")
    assert not parsed.has_message_id
    back, _ = reply_to(b"From: a@x.org\r\nMessage-ID: <junk\xff id>\r\nSubject: s\r\n\r\n")
    assert back["In-Reply-To"] is None and back["References"] is None


def test_c1_controls_never_reach_a_reply_subject() -> None:
    back, _ = reply_to(head("Subject: a\u0080b\u0081c\u008dd".encode()))
    assert back["Subject"] == "Re: abcd"


@pytest.mark.parametrize(
    ("charset", "body", "expected"),
    [
        ("iso-8859-1", "caf\u00e9".encode(), "caf\u00e9"),  # a charset that lies
        ("utf-8", b"caf\xe9", "caf\u00e9"),
        ("x-unknown", b"na\xefve", "na\u00efve"),
        ("utf-8", b"nul\x00 and \x1b[31mescape", "nul and [31mescape"),
        ("utf-16", "wide text".encode("utf-16"), "wide text"),
        ("shift_jis", "\u65e5\u672c\u8a9e".encode("shift_jis"), "\u65e5\u672c\u8a9e"),
    ],
)
def test_body_text_in_any_charset(charset: str, body: bytes, expected: str) -> None:
    raw = (
        head(
            b"MIME-Version: 1.0",
            f"Content-Type: text/plain; charset={charset}".encode(),
            b"Content-Transfer-Encoding: 8bit",
        )
        + body
    )
    text = extract_text(raw, max_chars=1000).text
    assert text == expected
    assert readable(text.replace("\n", ""))


def test_decode_prefers_utf8_then_the_label_then_cp1252() -> None:
    assert decode("\u00e9".encode(), "iso-8859-1") == "\u00e9"
    assert decode(b"\xe9", "iso-8859-1") == "\u00e9"
    assert decode(b"\x80\x81", None) == "\u20ac\x81"  # what cp1252 leaves undefined: Latin-1
    assert decode(b"ok \xe9 \xc3\xa9", None) == "ok \u00e9 \u00e9"  # per run of bytes
    assert header_text("\udcc3\udca9", max_chars=10) == "\u00e9"  # surrogate escapes


def forward(inner: bytes, *, as_attachment: bool = False, own: str = "FYI, see below") -> bytes:
    boundary = f"b{len(inner)}".encode()  # a boundary of its own at each level
    disposition = b"Content-Disposition: attachment\r\n" if as_attachment else b""
    return (
        head(
            b"Subject: Fwd: something",
            b"MIME-Version: 1.0",
            b'Content-Type: multipart/mixed; boundary="' + boundary + b'"',
        )
        + b"--"
        + boundary
        + b"\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        + own.encode()
        + b"\r\n--"
        + boundary
        + b"\r\nContent-Type: message/rfc822\r\n"
        + disposition
        + b"\r\n"
        + inner
        + b"\r\n--"
        + boundary
        + b"--\r\n"
    )


def plain_mail(sender: str, subject: str, body: str) -> bytes:
    return (
        f"From: {sender}\r\nDate: Mon, 02 Mar 2026 12:00:00 +0000\r\n"
        f"Subject: {subject}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    ).encode()


@pytest.mark.parametrize("as_attachment", [False, True])
def test_a_forwarded_mail_shows_its_sender_subject_and_text(as_attachment: bool) -> None:
    inner = plain_mail("Bob <bob@example.com>", "Quarterly numbers", "Revenue is up 12%.")
    body = extract_text(forward(inner, as_attachment=as_attachment), max_chars=5000)
    text = body.text
    assert text.startswith("FYI, see below")
    assert "Forwarded message 1 (enclosed in this mail; not written by its sender)" in text
    assert "From: Bob <bob@example.com>" in text
    assert "Subject: Quarterly numbers" in text
    assert "Date: Mon, 02 Mar 2026 12:00:00 +0000" in text
    assert "Revenue is up 12%." in text
    assert body.attachments == ()  # not listed as an unopened attachment any more


def test_a_forward_of_a_forward_shows_both_enclosed_mails() -> None:
    innermost = plain_mail("Carol <carol@example.com>", "Original question", "Can we meet?")
    middle = forward(innermost, own="Bob adds: please answer Carol").replace(
        b"From: Alice <alice@example.org>", b"From: Bob <bob@example.com>"
    )
    text = extract_text(forward(middle), max_chars=5000).text
    assert "From: Bob <bob@example.com>" in text and "Bob adds: please answer Carol" in text
    assert "Forwarded message 1.1" in text
    assert "From: Carol <carol@example.com>" in text
    assert "Subject: Original question" in text and "Can we meet?" in text


def digest(parts: bytes) -> bytes:
    """A multipart/digest mail (boundary `d`) around `parts`."""
    return (
        head(
            b"Subject: Digest",
            b"MIME-Version: 1.0",
            b'Content-Type: multipart/digest; boundary="d"',
        )
        + parts
        + b"--d--\r\n"
    )


def test_a_digest_of_three_shows_each_mail() -> None:
    parts = b"".join(
        b"--d\r\n\r\n" + plain_mail(f"P{i} <p{i}@example.com>", f"Topic {i}", f"Text {i}")
        for i in range(1, 4)
    )
    raw = digest(parts)
    text = extract_text(raw, max_chars=5000).text
    for i in range(1, 4):
        assert f"Forwarded message {i} " in text
        assert f"From: P{i} <p{i}@example.com>" in text
        assert f"Subject: Topic {i}" in text and f"Text {i}" in text


def test_enclosed_mails_stay_under_the_body_cap() -> None:
    big = plain_mail("Bob <bob@example.com>", "Long", "word " * 50_000)
    parts = b"".join(b"--d\r\n\r\n" + big for _ in range(30))
    raw = digest(parts)
    body = extract_text(raw, max_chars=4000)
    assert body.truncated
    assert len(body.text) < 4000 + 1000
    assert "more enclosed mails not shown" in body.text


def test_a_mail_enclosing_itself_deeply_ends() -> None:
    raw = plain_mail("Z <z@example.com>", "bottom", "deep text")
    for _ in range(40):
        raw = forward(raw, own="layer")
    text = extract_text(raw, max_chars=100_000).text
    assert "Forwarded message 1.1.1.1.1 " in text
    assert "1.1.1.1.1.1.1.1" not in text


def test_a_from_too_long_to_read_is_left_alone_with_its_reason() -> None:
    raw = b"From: " + b"junk " * 2000 + b"<alice@example.org>\r\nSubject: s\r\n\r\n"
    gate = Gate(
        own_address="bot@example.net",
        allowed_senders=["alice@example.org"],
        allowed_domains=[],
        require_authentication=False,
        trusted_authserv_id="mx.example.net",
    )
    assert gate.reason_to_ignore(parse_headers(raw)) == "from_too_long"


@pytest.mark.parametrize(
    "field",
    [
        # the standard parser's cost grows with the square of a field (100 kB took 40 s)
        b'Content-Type: text/plain; charset=utf-8; x="' + b"a " * 100_000 + b'"',
        b"Content-Type: " + b"=?utf-8?b?//4=?= \xff (" * 5_000,
        # nested comments exhausted its recursion
        b"Content-Type: text/plain (" + b"(" * 5_000,
        b"Content-Disposition: inline; " + b'a="b";' * 30_000,
    ],
)
def test_a_huge_or_deeply_nested_field_does_not_stop_the_mail_being_read(field: bytes) -> None:
    raw = b"From: Alice <alice@example.org>\r\nSubject: s\r\n" + field + b"\r\n\r\nPlease read me"
    assert parse_headers(raw).from_addr == "alice@example.org"
    assert extract_text(raw, max_chars=1000).text == "Please read me"
    nested_from = parse_headers(b"From: " + b"(" * 3_000 + b"alice@example.org\r\n\r\n")
    assert nested_from.from_addr == ""  # not read, so not answered: no crash either


@given(st.binary(max_size=300), st.sampled_from([None, "utf-8", "latin-1", "x-bad", "utf-16"]))
def test_any_bytes_in_any_declared_charset_decode_to_valid_text(
    data: bytes, charset: str | None
) -> None:
    decode(data, charset).encode("utf-8")
    try:
        expected = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    if charset != "utf-16":
        assert decode(data, charset) == expected  # valid UTF-8 reads as itself


@given(st.binary(max_size=300))
def test_any_raw_header_value_is_printable_text(data: bytes) -> None:
    text = header_text(data.decode("ascii", "surrogateescape"), max_chars=1000)
    assert readable(text) and "\n" not in text and "\t" not in text
    assert header_text(text, max_chars=1000) == text or "=?" in text  # stable when re-read


@given(st.text(max_size=300))
def test_a_subject_written_as_encoded_words_reads_back_as_itself(text: str) -> None:
    subject = printable(text, max_chars=1000)
    assert header_text(encoded_words(subject), max_chars=1000) == subject


def test_a_mail_of_very_many_parts_is_read_up_to_the_part_cap() -> None:
    raw = (
        head(b"MIME-Version: 1.0", b'Content-Type: multipart/mixed; boundary="b"')
        + b"--b\r\nContent-Type: text/plain\r\n\r\nthe first words\r\n"
        + b"--b\r\nContent-Type: application/x-y\r\n\r\nz\r\n" * 20_000
        + b"--b--\r\n"
    )
    body = extract_text(raw, max_chars=1000)
    assert body.text.startswith("the first words")
    assert body.truncated and "more than 1000 parts" in body.text
    assert len(body.attachments) < 1000


def test_the_prompt_names_at_most_fifty_attachments() -> None:
    raw = (
        head(b"MIME-Version: 1.0", b'Content-Type: multipart/mixed; boundary="b"')
        + b"--b\r\nContent-Type: text/plain\r\n\r\nsee the files\r\n"
        + b"".join(
            b"--b\r\nContent-Type: application/x-y\r\nContent-Disposition: attachment; "
            b'filename="f%d.bin"\r\n\r\nz\r\n' % i
            for i in range(120)
        )
        + b"--b--\r\n"
    )
    text = prompt_text(parse_headers(raw), extract_text(raw, max_chars=1000))
    assert "f49.bin" in text and "f50.bin" not in text and "and 70 more" in text


def test_an_attached_eml_file_under_a_generic_type_is_shown_as_forwarded() -> None:
    inner = plain_mail("Bob <bob@example.com>", "As a file", "Sent as an .eml attachment.")
    raw = (
        head(b"Subject: Fwd", b"MIME-Version: 1.0", b'Content-Type: multipart/mixed; boundary="e"')
        + b"--e\r\nContent-Type: text/plain\r\n\r\nhave a look\r\n"
        + b"--e\r\nContent-Type: application/octet-stream\r\n"
        + b'Content-Disposition: attachment; filename="fwd.eml"\r\n'
        + b"Content-Transfer-Encoding: base64\r\n\r\n"
        + base64.encodebytes(inner)
        + b"--e--\r\n"
    )
    body = extract_text(raw, max_chars=5000)
    assert "Forwarded message 1 " in body.text
    assert "From: Bob <bob@example.com>" in body.text and "Sent as an .eml attachment." in body.text
    assert body.attachments == ()


def test_a_long_subject_beyond_ascii_reads_back_exactly() -> None:
    """The standard folder, refolding a long subject, added a space between a word and text."""
    subject = (
        "Returned mail: Too many hops 19 (17 max): from <admin@www.example.org.uk> via "
        "[199.164.235.226], to <scoffman@wellpartn\u00c3er.com>"
    )
    back, wire = reply_to(head(b"Subject: " + subject.encode()))
    assert back["Subject"] == "Re: " + subject
    assert max(len(line) for line in wire.split(b"\r\n")) <= 78


def test_an_attachment_type_with_junk_in_it_is_listed_as_unknown() -> None:
    raw = (
        head(b"MIME-Version: 1.0", b'Content-Type: multipart/mixed; boundary="b"')
        + b"--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n"
        + b"--b\r\nContent-Type: mul\x10ti\xffpart/x\x00y\r\n\r\nzz\r\n--b--\r\n"
    )
    body = extract_text(raw, max_chars=1000)
    assert [a.content_type for a in body.attachments] == ["application/octet-stream"]
    assert readable(prompt_text(parse_headers(raw), body).replace("\n", ""))


def test_a_long_ascii_subject_with_one_long_word_reads_back_exactly() -> None:
    subject = "bug demonstration 123456789112345678921234567893123456789412345678951"
    back, _ = reply_to(head(b"Subject: " + subject.encode()))
    assert back["Subject"] == "Re: " + subject


def test_a_subject_loses_its_byte_order_marks_and_bidi_overrides() -> None:
    raw = head("Subject: \ufeffinvoice \u202egpj.exe\u202c \u2067x\u2069 \u200dok".encode())
    assert parse_headers(raw).subject == "invoice gpj.exe x \u200dok"
