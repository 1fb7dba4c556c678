"""Any header and body bytes through the real path: parse -> decide -> the router -> a turn
(the scripted model, which echoes what it was shown) -> the reply composed and serialised
with `email.policy.SMTP`. No exception escapes, the reply is valid and reads back, and the
sender's next mail of the same session is answered after it.

Only the transports are replaced: IMAP by the bytes themselves, SMTP by a sender that
serialises the message the way the SMTP client would, the model by the scripted one."""

from __future__ import annotations

import tempfile
import unicodedata
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import anyio
from aiosmtplib.email import flatten_message
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from squidd.channels.email.body import extract_text
from squidd.channels.email.compose import reply_subject
from squidd.channels.email.headers import parse_headers
from squidd.channels.email.inbound import make_inbound, prompt_text
from squidd.channels.email.policy import Gate
from squidd.channels.email.send import send_reply
from squidd.config.email import EmailSettings
from squidd.core.memory import MemoryManager
from squidd.core.models import Inbound, Outbound
from squidd.core.router import APOLOGY
from squidd.core.tools import ToolRegistry
from squidd.store.jsonl import JsonlStore
from tests.support.agent import agent_loop
from tests.support.fake_llm import Reply
from tests.support.mock_llm import MockLLM, scripted_llm
from tests.support.prompt import StaticPrompt
from tests.support.router import Records, build_router

BOT = "bot@example.net"
ALICE = "alice@example.org"
SETTINGS = EmailSettings(
    enabled=True,
    address=BOT,
    imap_host="127.0.0.1",
    smtp_host="127.0.0.1",
    password="unused-test-password",
    allowed_senders=[ALICE],
    require_authentication=False,
)
GATE = Gate(
    own_address=BOT,
    allowed_senders=[ALICE],
    allowed_domains=[],
    require_authentication=False,
    trusted_authserv_id="",
)


class WireSender:
    """Stands in for `SmtpSender`: the message serialised as the SMTP client serialises it
    for a server with 8BITMIME (Postfix), and with the standard library's SMTP policy."""

    def __init__(self) -> None:
        self.wire: list[bytes] = []

    async def send(self, message: EmailMessage, *, recipient: str) -> None:
        flatten_message(message, utf8=False, cte_type="8bit")
        flatten_message(message, utf8=True, cte_type="8bit")
        self.wire.append(message.as_bytes(policy=policy.SMTP))


class Channel:
    name = "email"

    def __init__(self) -> None:
        self.smtp = WireSender()
        self.sent: list[Outbound] = []

    async def run(self, inbox: object, *, task_status: object) -> None:
        raise NotImplementedError

    async def send(self, outbound: Outbound) -> None:
        await send_reply(outbound, settings=SETTINGS, smtp=self.smtp)  # type: ignore[arg-type]
        self.sent.append(outbound)


def echo(request: dict[str, Any]) -> Reply:
    """The model repeats the start of what it was shown: hostile text goes into the reply."""
    user = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    text = user if isinstance(user, str) else str(user)
    return Reply(content=f"You wrote: {text[:400]}")


def mail(fields: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    head = b"From: " + fields[0][1] + b" <" + ALICE.encode() + b">\r\n"
    head += b"".join(name + b": " + value + b"\r\n" for name, value in fields[1:])
    return head + b"\r\n" + body


def inbound_of(raw: bytes) -> Inbound | None:
    """What the receive loop hands on for `raw` (None: left alone, with its reason)."""
    headers = parse_headers(raw)
    if GATE.reason_to_ignore(headers) is not None:
        return None
    body = extract_text(raw, max_chars=SETTINGS.max_text_chars)

    async def ack() -> None:
        return None

    async def undeliverable(reason: str) -> None:
        raise AssertionError(f"a reply was refused: {reason}")

    return make_inbound(
        headers,
        prompt_text(headers, body),
        body,
        ack=ack,
        on_undeliverable=undeliverable,
    )


async def round_trip(raw: bytes, data: Path) -> None:
    llm, mock = scripted_llm(mock=MockLLM())
    mock.script = [echo, echo]
    loop = agent_loop(
        llm=llm,
        memory=MemoryManager(JsonlStore(data), llm, consolidation_threshold=100),
        registry=ToolRegistry(),
        prompt=StaticPrompt("test prompt"),
    )

    async def turn(message: Inbound) -> str:
        return await loop.run(message.session_id, message.text, "email")

    channel = Channel()
    records = Records()
    router = build_router(turn, {"email": channel}, records=records)
    odd = inbound_of(raw)
    follow_up = inbound_of(
        f"From: {ALICE}\r\nMessage-ID: <next@example.org>\r\nSubject: next\r\n\r\nand now?".encode()
    )
    assert follow_up is not None
    expected = 2 if odd is not None else 1
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        inbox = router.inbox("email")
        if odd is not None:
            await inbox.put(odd)
        await inbox.put(follow_up)
        with anyio.fail_after(20):  # a guard against hanging, not a timing assertion
            while len(channel.sent) < expected:  # noqa: ASYNC110 - no event to wait on
                await anyio.sleep(0.005)
        tg.cancel_scope.cancel()
    assert [o.in_reply_to.source_id for o in channel.sent if o.in_reply_to][-1] == (
        "<next@example.org>"
    )
    for outbound, wire in zip(channel.sent, channel.smtp.wire, strict=True):
        assert outbound.text != APOLOGY  # the turn itself did not fail
        back = BytesParser(policy=policy.default).parsebytes(wire)
        subject = str(back["Subject"])
        assert outbound.in_reply_to is not None
        # the recipient reads the subject meant for them: valid, printable, itself
        assert subject == reply_subject(outbound.in_reply_to.subject)
        subject.encode("utf-8")
        assert subject.startswith("Re: ")
        assert not [c for c in subject if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")]
        for name in ("In-Reply-To", "References", "Message-ID"):
            assert b"=?" not in b"".join(
                line
                for line in wire.split(b"\r\n\r\n")[0].split(b"\r\n")
                if line.lower().startswith(name.lower().encode() + b":")
            )
        part = back.get_body(preferencelist=("plain",))
        assert part is not None
        part.get_content().encode("utf-8")


HEADER_NAMES = st.sampled_from(
    [
        b"Subject",
        b"References",
        b"In-Reply-To",
        b"Message-ID",
        b"Content-Type",
        b"Content-Transfer-Encoding",
        b"MIME-Version",
        b"Date",
        b"X-Junk",
        b"Reply-To",
    ]
)
# Raw bytes, encoded-word shapes and charsets mixed in, so the decoders see both.
PIECES = st.one_of(
    st.binary(max_size=40),
    st.sampled_from(
        [
            b"=?utf-8?b?//4=?=",
            b"=?x-bad?q?a?=",
            b"=?utf-8?q?",
            b"?=",
            b"=?iso-8859-1?q?caf=C3=A9?=",
            b"<a@b>",
            b"\xff\xfe",
            b"\x00",
            b"\r\n ",
            b'multipart/mixed; boundary="b"',
            b"text/plain; charset=utf-16",
            b"message/rfc822",
            b"base64",
            b"\x80\x81\x8d",
            b"text/html; charset=shift_jis",
            b"=?utf-8?b?PGFiY++/vUBkPg==?=",
        ]
    ),
)
VALUES = st.lists(PIECES, max_size=6).map(b"".join)


# The reported failures, always tried first: a word that decodes to a lookalike word,
# bytes no charset holds, junk in References, a NUL, C1 controls.
@example(
    name=b"=?utf-8?b?//4=?= \xff\xfe",
    fields=[(b"Subject", b"=?utf-8?q?=3D=3Futf-8=3Fb=3F=2F=2F4=3D=3F=3D?=")],
    body=b"hi",
)
@example(
    name=b"",
    fields=[
        (b"Subject", b"=?utf-8?b?//4=?= =?x-bad?q?a?= =?utf-8?b?!!!?= =?utf-8?q?open"),
        (b"References", b"<abc\xff@d> =?utf-8?b?PGFiY++/vUBkPg==?="),
    ],
    body=b"caf\xe9",
)
@example(name=b"\x00", fields=[(b"Subject", b"a\x00b\x80\x81\x8d")], body=b"\x00")
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    name=VALUES,
    fields=st.lists(st.tuples(HEADER_NAMES, VALUES), max_size=8),
    body=st.lists(st.one_of(PIECES, st.sampled_from([b"--b\r\n", b"\r\n\r\n"])), max_size=12).map(
        b"".join
    ),
)
def test_any_header_and_body_bytes_get_a_valid_reply_and_the_next_mail_is_answered(
    name: bytes, fields: list[tuple[bytes, bytes]], body: bytes
) -> None:
    raw = mail([(b"From", name.replace(b"\r", b"").replace(b"\n", b"")), *fields], body)
    with tempfile.TemporaryDirectory() as data:
        anyio.run(round_trip, raw, Path(data))
