"""The email channel against the real Dovecot + Postfix: receiving, deciding, replying,
acknowledging. A small test inbox stands in for the router (send, then ack)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.message import EmailMessage
from email.utils import parseaddr
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from squidd.channels.email import EmailChannel
from squidd.channels.email.compose import derived_message_id
from squidd.channels.email.state import state_path
from squidd.core.models import Inbound, Outbound
from squidd.core.ports import ChannelState
from squidd.errors import DeliveryError, DeliveryRefusedError, PermanentError
from tests.channels.email.mailbox import (
    ALICE,
    DOMAIN,
    TRUSTED_ID,
    MailServer,
    TestInbox,
    append,
    bot_settings,
    eventually,
    find,
    inject,
    make_mail,
    read_mailbox,
    replies_for_alice,
)

pytestmark = [pytest.mark.anyio, pytest.mark.mail]


@asynccontextmanager
async def running(channel: EmailChannel, inbox: TestInbox) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        await tg.start(channel.run, inbox)
        yield
        tg.cancel_scope.cancel()


async def answer(channel: EmailChannel, inbound: Inbound, text: str) -> None:
    """What the router does: send the reply, and only then acknowledge."""
    await channel.send(
        Outbound(
            channel="email",
            target=inbound.sender,
            text=text,
            session_id=inbound.session_id,
            in_reply_to=inbound,
        )
    )
    await inbound.ack()


def channel_for(server: MailServer, bot: str, data_dir: Path, **overrides: Any) -> EmailChannel:
    return EmailChannel(bot_settings(server, bot, **overrides), data_dir)


async def send(server: MailServer, msg: EmailMessage, bot: str) -> str:
    await inject(server, msg, to=bot, sender=parseaddr(str(msg["From"]))[1])
    return str(msg["Message-ID"])


async def test_round_trip_threads_the_reply_and_marks_seen_only_after_sending(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    channel = channel_for(mail_server, bot, data_dir)
    inbox = TestInbox()
    first_id = "<first@sender.example.test>"
    msg = make_mail(
        to=bot,
        sender="Alice Example <Alice@Example.test>",
        subject="Plans for Friday",
        body="Shall we meet at noon?\n\n-- \nAlice\nSent with love",
        headers={"References": first_id},
    )
    inbound_id = await send(mail_server, msg, bot)
    async with running(channel, inbox):
        inbound = await inbox.next()
        # Nothing is marked read before the reply went out.
        assert "\\Seen" not in (await find(mail_server, bot, inbound_id)).flags
        await answer(channel, inbound, "**Noon** works.\n\n- bring the map\n- and water")

    assert inbound.channel == "email"
    assert inbound.source_id == inbound_id
    assert inbound.sender == ALICE
    assert inbound.session_id == ALICE
    assert inbound.text.startswith("Subject: Plans for Friday")
    assert "Shall we meet at noon?" in inbound.text
    assert "Sent with love" not in inbound.text  # the signature is not the model's business
    assert inbound.meta["message_id"] == inbound_id
    assert inbound.meta["references"] == (first_id,)

    [reply] = await replies_for_alice(mail_server, inbound_id)
    r = reply.message
    assert r["From"].addresses[0].addr_spec == bot
    assert r["To"].addresses[0].addr_spec == ALICE
    assert r["Subject"] == "Re: Plans for Friday"
    assert r["In-Reply-To"] == inbound_id
    assert r["References"].split() == [first_id, inbound_id]
    assert r["Message-ID"] == derived_message_id(inbound_id, DOMAIN)
    assert r["Auto-Submitted"] == "auto-replied"
    assert r.get_content_type() == "multipart/alternative"
    plain = r.get_body(preferencelist=("plain",))
    html = r.get_body(preferencelist=("html",))
    assert plain is not None and html is not None
    assert "**Noon** works." in plain.get_content()
    assert "<strong>Noon</strong>" in html.get_content()
    assert "<li>bring the map</li>" in html.get_content()
    assert "\\Seen" in (await find(mail_server, bot, inbound_id)).flags


async def test_idle_picks_up_mail_that_arrives_while_connected(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    # Polling is set to an hour: only the IDLE push can bring this mail in.
    channel = channel_for(mail_server, bot, data_dir, poll_interval_s=3600)
    inbox = TestInbox()
    with capture_logs() as logs:
        async with running(channel, inbox):
            msg_id = await send(mail_server, make_mail(to=bot, subject="pushed"), bot)
            inbound = await inbox.next()
    assert inbound.source_id == msg_id
    connected = [e for e in logs if e["event"] == "email_connected"]
    assert connected and connected[0]["idle"] is True
    assert (ChannelState.CONNECTED, f"{mail_server.host} INBOX") in inbox.states


async def _ignored_then_sentinel(
    server: MailServer, bot: str, data_dir: Path, ignored: list[EmailMessage]
) -> list[dict[str, Any]]:
    """Inject the mails that must be ignored, then one that must be answered; return the
    `email_ignored` log events once the sentinel arrived (so all were looked at)."""
    ids = [await send(server, msg, bot) for msg in ignored]
    sentinel = await send(server, make_mail(to=bot, subject="sentinel"), bot)
    inbox = TestInbox()
    with capture_logs() as logs:
        async with running(channel_for(server, bot, data_dir), inbox):
            inbound = await inbox.next()
            assert inbound.source_id == sentinel
    assert [m.source_id for m in inbox.received] == [sentinel]
    # Ignored mail is left as it was: still there, still unread.
    for msg_id in ids:
        assert "\\Seen" not in (await find(server, bot, msg_id)).flags
    return [e for e in logs if e["event"] == "email_ignored"]


async def test_a_stranger_is_ignored(mail_server: MailServer, bot: str, data_dir: Path) -> None:
    stranger = make_mail(to=bot, sender=f"stranger@{DOMAIN}", subject="hi from nobody")
    other_domain = make_mail(to=bot, sender="eve@elsewhere.test", subject="hello")
    events = await _ignored_then_sentinel(mail_server, bot, data_dir, [stranger, other_domain])
    assert [(e["reason"], e["sender"]) for e in events] == [
        ("not_allowlisted", f"stranger@{DOMAIN}"),
        ("not_allowlisted", "eve@elsewhere.test"),
    ]


async def test_a_spoofed_from_without_passing_authentication_is_ignored(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    no_results = make_mail(to=bot, auth=None, subject="spoof 1")
    untrusted_server = make_mail(
        to=bot, auth=f"mx.attacker.test; dmarc=pass header.from={DOMAIN}", subject="spoof 2"
    )
    dmarc_fail = make_mail(
        to=bot,
        auth=f"{TRUSTED_ID}; dkim=none; dmarc=fail header.from={DOMAIN}",
        subject="spoof 3",
    )
    foreign_dkim = make_mail(
        to=bot, auth=f"{TRUSTED_ID}; dkim=pass header.d=attacker.test", subject="spoof 4"
    )
    events = await _ignored_then_sentinel(
        mail_server, bot, data_dir, [no_results, untrusted_server, dmarc_fail, foreign_dkim]
    )
    assert [e["reason"] for e in events] == [
        "no_trusted_authentication_results",
        "no_trusted_authentication_results",
        "dmarc_fail",
        "no_dmarc_or_aligned_dkim_pass",
    ]


async def test_automatic_mail_is_never_answered(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    auto = make_mail(to=bot, headers={"Auto-Submitted": "auto-replied"}, subject="Out of office")
    bulk = make_mail(to=bot, headers={"Precedence": "bulk"})
    listed = make_mail(to=bot, headers={"List-Id": "<friends.example.test>"})
    own = make_mail(to=bot, sender=bot)
    events = await _ignored_then_sentinel(mail_server, bot, data_dir, [auto, bulk, listed, own])
    assert [e["reason"] for e in events] == [
        "auto_submitted",
        "precedence_bulk",
        "mailing_list",
        "own_address",
    ]


async def test_legacy_charset_and_encoded_subject(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    body = "Grüße aus Köln! Das Wetter ist schön.\n".encode("iso-8859-1")
    raw = (
        b"Authentication-Results: " + f"{TRUSTED_ID}; dmarc=pass".encode() + b"\r\n"
        b"From: =?iso-8859-1?q?J=FCrgen?= <alice@example.test>\r\n"
        b"To: " + bot.encode() + b"\r\n"
        b"Subject: =?iso-8859-1?q?Gr=FC=DFe_aus_K=F6ln?=\r\n"
        b"Message-ID: <latin1@sender.example.test>\r\n"
        b"MIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=iso-8859-1\r\n"
        b"Content-Transfer-Encoding: 8bit\r\n\r\n" + body
    )
    await inject(mail_server, raw, to=bot, sender=ALICE, message_id="<latin1@sender.example.test>")
    channel = channel_for(mail_server, bot, data_dir)
    inbox = TestInbox()
    async with running(channel, inbox):
        inbound = await inbox.next()
        await answer(channel, inbound, "Danke, ebenso schön hier.")
    assert inbound.subject == "Grüße aus Köln"
    assert "Grüße aus Köln! Das Wetter ist schön." in inbound.text
    [reply] = await replies_for_alice(mail_server, "<latin1@sender.example.test>")
    assert reply.message["Subject"] == "Re: Grüße aus Köln"
    plain = reply.message.get_body(preferencelist=("plain",))
    assert plain is not None and "ebenso schön" in plain.get_content()


async def test_html_only_mail_is_read_as_text(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    msg = make_mail(to=bot, subject="html only")
    msg.set_content(
        "<html><head><style>p {color: red}</style><script>alert('x')</script></head><body>"
        "<p>Please read <b>the report</b> at <a href='https://example.test/r'>this link</a>.</p>"
        "<blockquote>On Monday you wrote: old stuff</blockquote></body></html>",
        subtype="html",
    )
    msg_id = await send(mail_server, msg, bot)
    inbox = TestInbox()
    async with running(channel_for(mail_server, bot, data_dir), inbox):
        inbound = await inbox.next()
    assert inbound.source_id == msg_id
    assert "Please read **the report** at [this link](https://example.test/r)." in inbound.text
    assert "<p>" not in inbound.text and "<b>" not in inbound.text
    assert "alert" not in inbound.text
    assert "color: red" not in inbound.text
    assert "old stuff" not in inbound.text  # quoted history trimmed


async def test_a_20_mb_mail_gets_a_short_answer_without_being_loaded(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    msg = make_mail(to=bot, subject="the big file")
    msg.add_attachment(
        b"\x00" * (20 * 1000 * 1000),
        maintype="application",
        subtype="octet-stream",
        filename="huge.bin",
    )
    msg_id = await send(mail_server, msg, bot)
    channel = channel_for(mail_server, bot, data_dir)  # default cap: 10 MB
    inbox = TestInbox()
    async with running(channel, inbox):
        inbound = await inbox.next(timeout=60)
        await answer(channel, inbound, "That mail was too large for me to read.")
    assert inbound.source_id == msg_id
    assert inbound.meta["oversize"] is True
    assert len(inbound.text) < 500
    assert "over the 10.0 MB size limit" in inbound.text
    assert "the big file" in inbound.text
    await replies_for_alice(mail_server, msg_id)
    assert "\\Seen" in (await find(mail_server, bot, msg_id)).flags


async def test_oversize_mail_can_be_skipped(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    big = make_mail(to=bot, subject="big", body="x" * 5000)
    ids = [await send(mail_server, big, bot)]
    sentinel = await send(mail_server, make_mail(to=bot, subject="small"), bot)
    inbox = TestInbox()
    channel = channel_for(mail_server, bot, data_dir, max_size_bytes=4000, oversize_action="skip")
    with capture_logs() as logs:
        async with running(channel, inbox):
            assert (await inbox.next()).source_id == sentinel
    events = [e for e in logs if e["event"] == "email_ignored"]
    assert [e["reason"] for e in events] == ["too_large"]
    assert "\\Seen" not in (await find(mail_server, bot, ids[0])).flags


MALFORMED = (
    b"Authentication-Results: mx.example.test; dmarc=pass\r\n"
    b"From: alice@example.test\r\n"
    b"To: BOT\r\n"
    b"Subject: =?x-unknown-charset?q?broken=ZZ?= and =?utf-8?b?!!!notbase64?=\r\n"
    b"Message-ID: <malformed@sender.example.test>\r\n"
    b"MIME-Version: 1.0\r\n"
    b'Content-Type: multipart/mixed; boundary="outer"\r\n\r\n'
    b"--outer\r\n"
    b"Content-Type: text/plain; charset=x-no-such-charset\r\n"
    b"Content-Transfer-Encoding: base64\r\n\r\n"
    b"SGVsbG8gZnJvbSBhIGJyb2tlbiBtYWls!!!not base64 at all\r\n"
    b"--outer\r\n"
    b'Content-Type: application/pdf; name="../../../etc/passwd"\r\n'
    b'Content-Disposition: attachment; filename="../../../etc/passwd"\r\n'
    b"Content-Transfer-Encoding: base64\r\n\r\n"
    b"JVBERi0xLjQK\r\n"
    b"--outer\r\n"
    b'Content-Type: multipart/alternative; boundary="inner-never-closed"\r\n\r\n'
    b"--inner-never-closed\r\n"
    b"Content-Type: text/plain\r\n\r\n"
    b"dangling part\r\n"
)


async def test_malformed_mime_is_read_as_well_as_it_can_be(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    await inject(
        mail_server,
        MALFORMED.replace(b"BOT", bot.encode()),
        to=bot,
        sender=ALICE,
        message_id="<malformed@sender.example.test>",
    )
    sentinel = await send(mail_server, make_mail(to=bot, subject="after the broken one"), bot)
    inbox = TestInbox()
    async with running(channel_for(mail_server, bot, data_dir), inbox):
        broken = await inbox.next()
        after = await inbox.next()
    assert broken.source_id == "<malformed@sender.example.test>"
    assert "[Attachments, not opened: ../../../etc/passwd (application/pdf, 9 B)]" in broken.text
    assert after.source_id == sentinel  # the channel went on


async def test_a_restart_neither_misses_nor_rereads_and_redelivers_the_unanswered(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    stranger = await send(mail_server, make_mail(to=bot, sender=f"stranger@{DOMAIN}"), bot)
    answered = await send(mail_server, make_mail(to=bot, subject="one"), bot)
    unanswered = await send(mail_server, make_mail(to=bot, subject="two"), bot)
    channel = channel_for(mail_server, bot, data_dir)
    inbox = TestInbox()
    async with running(channel, inbox):
        first = await inbox.next()
        second = await inbox.next()
        await answer(channel, first, "answer one")
    assert [first.source_id, second.source_id] == [answered, unanswered]
    # The process "dies" before answering `two`. A new one, same data dir:
    later = await send(mail_server, make_mail(to=bot, subject="three"), bot)
    inbox2 = TestInbox()
    with capture_logs() as logs:
        async with running(channel_for(mail_server, bot, data_dir), inbox2):
            again = await inbox2.next()
            new = await inbox2.next()
    assert [again.source_id, new.source_id] == [unanswered, later]
    assert not [e for e in logs if e["event"] == "email_ignored"]  # the stranger: not re-read
    assert "\\Seen" not in (await find(mail_server, bot, stranger)).flags


async def test_smtp_down_leaves_the_mail_unseen_until_the_reply_is_sent(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    channel = channel_for(mail_server, bot, data_dir)
    inbox = TestInbox()
    msg = make_mail(to=bot, subject="while smtp is down")
    await append(mail_server, bot, msg)
    msg_id = str(msg["Message-ID"])
    async with running(channel, inbox):
        inbound = await inbox.next()
        outbound = Outbound(
            channel="email",
            target=inbound.sender,
            text="late but there",
            session_id=inbound.session_id,
            in_reply_to=inbound,
        )
        try:
            # Inside the try: a stop that fails halfway must still be followed by a start,
            # or every later test of the package finds no SMTP server.
            await mail_server.stop_postfix()
            with pytest.raises(DeliveryError):
                await channel.send(outbound)
            assert "\\Seen" not in (await find(mail_server, bot, msg_id)).flags
        finally:
            await mail_server.start_postfix()
        await channel.send(outbound)
        await inbound.ack()
    await replies_for_alice(mail_server, msg_id)
    assert "\\Seen" in (await find(mail_server, bot, msg_id)).flags


async def test_move_to_folder_after_reply(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    # The folder does not exist yet: the channel creates it.
    msg_id = await send(mail_server, make_mail(to=bot, subject="file me"), bot)
    channel = channel_for(mail_server, bot, data_dir, move_to="Done mail")
    inbox = TestInbox()
    async with running(channel, inbox):
        inbound = await inbox.next()
        await answer(channel, inbound, "done")
    assert msg_id not in [
        str(s.message["Message-ID"]) for s in await read_mailbox(mail_server, bot)
    ]


async def test_starttls_and_polling_when_idle_is_off(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    channel = channel_for(
        mail_server,
        bot,
        data_dir,
        imap_port=mail_server.imap_port,
        imap_security="starttls",
        idle=False,
        poll_interval_s=0.2,
    )
    inbox = TestInbox()
    with capture_logs() as logs:
        async with running(channel, inbox):
            msg_id = await send(mail_server, make_mail(to=bot, subject="polled"), bot)
            inbound = await inbox.next()
            await answer(channel, inbound, "polled and answered")
    assert inbound.source_id == msg_id
    assert [e["idle"] for e in logs if e["event"] == "email_connected"] == [False]
    assert "\\Seen" in (await find(mail_server, bot, msg_id)).flags


async def test_reconnects_when_the_server_drops_the_connection(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    channel = channel_for(mail_server, bot, data_dir)
    inbox = TestInbox()
    with capture_logs() as logs:
        async with running(channel, inbox):
            first = await send(mail_server, make_mail(to=bot, subject="before"), bot)
            assert (await inbox.next()).source_id == first
            await mail_server.kick(bot)
            second = await send(mail_server, make_mail(to=bot, subject="after"), bot)
            assert (await inbox.next()).source_id == second
    assert [e for e in logs if e["event"] == "email_reconnecting"]
    assert ChannelState.RECONNECTING in [state for state, _ in inbox.states]
    assert len([e for e in logs if e["event"] == "email_connected"]) >= 2


async def test_idle_is_renewed_and_keeps_receiving(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    channel = channel_for(mail_server, bot, data_dir, idle_renew_s=0.3)
    inbox = TestInbox()
    with capture_logs() as logs:
        async with running(channel, inbox):
            await eventually(lambda: len([e for e in logs if e["event"] == "email_idle_renew"]) > 1)
            msg_id = await send(mail_server, make_mail(to=bot, subject="after renewals"), bot)
            assert (await inbox.next()).source_id == msg_id


async def test_a_uidvalidity_change_rescans_unseen_mail(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    msg_id = await send(mail_server, make_mail(to=bot, subject="old uids are void"), bot)
    path = state_path(data_dir, bot, "INBOX")
    path.parent.mkdir(parents=True)
    path.write_text('{"uidvalidity": 1, "last_uid": 9999, "pending": [4242]}')
    inbox = TestInbox()
    with capture_logs() as logs:
        async with running(channel_for(mail_server, bot, data_dir), inbox):
            assert (await inbox.next()).source_id == msg_id
    assert [e for e in logs if e["event"] == "email_uidvalidity_changed"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"password": "wrong"}, "rejected the login"),
        ({"ca_file": None}, "certificate not trusted"),
    ],
)
async def test_what_a_reconnect_cannot_fix_is_permanent(
    mail_server: MailServer, bot: str, data_dir: Path, overrides: dict[str, Any], message: str
) -> None:
    channel = channel_for(mail_server, bot, data_dir, **overrides)
    inbox = TestInbox()
    with pytest.raises(PermanentError, match=message):
        await channel.run(inbox)
    assert inbox.states[-1][0] == ChannelState.FAILED


async def test_without_required_authentication_the_from_header_is_trusted_with_a_warning(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    channel = channel_for(mail_server, bot, data_dir, require_authentication=False)
    msg_id = await send(mail_server, make_mail(to=bot, auth=None, subject="local setup"), bot)
    inbox = TestInbox()
    with capture_logs() as logs:
        async with running(channel, inbox):
            assert (await inbox.next()).source_id == msg_id
    warnings = [e for e in logs if e["event"] == "email_sender_authentication_off"]
    assert warnings and warnings[0]["log_level"] == "warning"


@pytest.mark.parametrize("move_to", ["", "Answered"])
async def test_mail_that_arrives_after_the_ack_connection_opened_ends_seen(
    mail_server: MailServer, bot: str, data_dir: Path, move_to: str
) -> None:
    """The acknowledging connection stays open between mails; Dovecot ignores a STORE for a
    mail that connection has not learned of yet, so every answered mail after the first
    stayed unread (or was moved unread). Each one must end \\Seen."""
    channel = channel_for(mail_server, bot, data_dir, move_to=move_to)
    inbox = TestInbox()
    ids = []
    with capture_logs() as logs:
        async with running(channel, inbox):
            for n in range(3):
                ids.append(await send(mail_server, make_mail(to=bot, subject=f"mail {n}"), bot))
                inbound = await inbox.next()
                assert inbound.source_id == ids[-1]
                await answer(channel, inbound, f"answer {n}")
    assert len([e for e in logs if e["event"] == "email_acknowledged"]) == 3
    stored = {
        str(m.message["Message-ID"]): m.flags
        for m in await read_mailbox(mail_server, bot, move_to or "INBOX")
    }
    for msg_id in ids:
        assert "\\Seen" in stored[msg_id], msg_id


async def test_a_reply_refused_for_good_leaves_the_mail_flagged_unread_and_done(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    """Postfix refuses an unknown user of its own domain with 550: that is no reason to try
    again. The mail is flagged, stays unread, and a restart does not hand it on again."""
    ghost = f"ghost@{DOMAIN}"  # allowed by domain, but no such mailbox
    channel = channel_for(mail_server, bot, data_dir, allowed_domains=[DOMAIN])
    inbox = TestInbox()
    msg_id = await send(mail_server, make_mail(to=bot, sender=ghost, subject="from a ghost"), bot)
    async with running(channel, inbox):
        inbound = await inbox.next()
        assert inbound.sender == ghost
        reply = Outbound(
            channel="email",
            target=inbound.sender,
            text="hello ghost",
            session_id=inbound.session_id,
            in_reply_to=inbound,
        )
        with pytest.raises(DeliveryRefusedError, match="550"):
            await channel.send(reply)
        assert inbound.on_undeliverable is not None
        await inbound.on_undeliverable("550 refused")
    stored = await find(mail_server, bot, msg_id)
    assert "\\Flagged" in stored.flags
    assert "\\Seen" not in stored.flags
    later = await send(mail_server, make_mail(to=bot, subject="after the ghost"), bot)
    inbox2 = TestInbox()
    async with running(channel_for(mail_server, bot, data_dir, allowed_domains=[DOMAIN]), inbox2):
        assert (await inbox2.next()).source_id == later
    assert [m.source_id for m in inbox2.received] == [later]


class HeldInbox(TestInbox):
    """Holds the channel inside its first `put` until `release` is set: the receive loop is
    in the middle of a fetch round meanwhile."""

    __test__ = False

    def __init__(self) -> None:
        super().__init__()
        self.release = anyio.Event()

    async def put(self, message: Inbound) -> None:
        await super().put(message)
        if len(self.received) == 1:
            await self.release.wait()


async def test_mail_arriving_during_a_fetch_round_is_not_left_for_the_next_idle(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    """Dovecot announces the new mail once, with the answer to the next fetch of the burst;
    IDLE does not repeat it. It must be handed on without waiting for other mail or an IDLE
    renewal (set to 28 minutes here; the wait below is only a bound)."""
    burst = [
        await send(mail_server, make_mail(to=bot, subject=f"burst {n}"), bot) for n in range(8)
    ]
    channel = channel_for(mail_server, bot, data_dir, idle_renew_s=1700)
    inbox = HeldInbox()
    async with running(channel, inbox):
        first = await inbox.next()
        late = await send(mail_server, make_mail(to=bot, subject="during the burst"), bot)
        inbox.release.set()
        rest = [await inbox.next() for _ in range(8)]
    assert [m.source_id for m in [first, *rest]] == [*burst, late]


async def test_rate_limited_mail_is_answered_when_the_window_allows_not_dropped(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    """The rate limit is a loop guard: mail over it waits for the window, in order, without
    any new mail or IDLE renewal to wake the channel (the wait below is only a bound)."""
    ids = [await send(mail_server, make_mail(to=bot, subject=f"quick {n}"), bot) for n in range(3)]
    channel = channel_for(
        mail_server, bot, data_dir, rate_limit_count=1, rate_limit_window_s=2, idle_renew_s=1700
    )
    inbox = TestInbox()
    with capture_logs() as logs:
        async with running(channel, inbox):
            got = [await inbox.next() for _ in range(3)]
    assert [m.source_id for m in got] == ids
    deferred = [e for e in logs if e["event"] == "email_deferred"]
    assert [e["message_id"] for e in deferred] == ids[1:]
    assert not [e for e in logs if e["event"] == "email_ignored"]


async def test_rate_limit_counts_survive_a_restart(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    """A restart does not reset the sender's count (a mail loop across restarts must not
    escape the limit): the next process still defers the second mail, and hands it on once
    the window has passed. The wall clock is the test's, so nothing here waits for time."""
    first = await send(mail_server, make_mail(to=bot, subject="one"), bot)
    second = await send(mail_server, make_mail(to=bot, subject="two"), bot)
    hour = {"rate_limit_count": 1, "rate_limit_window_s": 3600}
    now = [1_000_000.0]

    def process() -> EmailChannel:
        return EmailChannel(bot_settings(mail_server, bot, **hour), data_dir, clock=lambda: now[0])

    inbox = TestInbox()
    channel = process()
    with capture_logs() as logs:
        async with running(channel, inbox):
            inbound = await inbox.next()
            await answer(channel, inbound, "one answered")
            await eventually(lambda: any(e["event"] == "email_deferred" for e in logs))
    assert [m.source_id for m in inbox.received] == [first]
    # A new process a minute later: the count is still there, the mail still waits. A mail
    # from a stranger, looked at after the deferred ones in the same scan, marks the point.
    now[0] += 60
    marker = await send(mail_server, make_mail(to=bot, sender=f"bob@{DOMAIN}"), bot)
    inbox2 = TestInbox()
    with capture_logs() as logs:
        async with running(process(), inbox2):
            await eventually(
                lambda: any(
                    e.get("message_id") == marker for e in logs if e["event"] == "email_ignored"
                )
            )
    assert inbox2.received == []
    # Another process past the window: handed on.
    now[0] += 3600
    inbox3 = TestInbox()
    async with running(process(), inbox3):
        assert (await inbox3.next()).source_id == second
