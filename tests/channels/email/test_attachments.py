"""Email attachments on the real Dovecot + Postfix: an allowed PDF is stored and read, a
disallowed type is only listed, a hostile file name never becomes a path."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.channels.email import EmailChannel
from squidd.config.media import MediaSettings
from squidd.media.reader import MediaReader
from squidd.store.media import MediaStore
from tests.channels.email.mailbox import MailServer, TestInbox, bot_settings, make_mail
from tests.channels.email.test_channel import running, send
from tests.support.media_files import pdf_with_text

pytestmark = [pytest.mark.anyio, pytest.mark.mail]


async def test_an_allowed_pdf_is_read_and_a_disallowed_type_only_listed(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    msg = make_mail(to=bot, subject="papers", body="see attached")
    msg.add_attachment(
        pdf_with_text("Contract number 5521"),
        maintype="application",
        subtype="pdf",
        filename="../../contract.pdf",
    )
    msg.add_attachment(
        b"MZ\x90\x00", maintype="application", subtype="x-msdownload", filename="tool.exe"
    )
    msg_id = await send(mail_server, msg, bot)
    store = MediaStore(data_dir, lifetime_s=3600)
    settings = bot_settings(mail_server, bot, allowed_attachment_types=["application/pdf"])
    channel = EmailChannel(settings, data_dir, media=store)
    inbox = TestInbox()
    async with running(channel, inbox):
        inbound = await inbox.next(timeout=60)
    assert inbound.source_id == msg_id
    [pdf] = inbound.attachments
    assert (pdf.kind, pdf.mime, pdf.name) == ("file", "application/pdf", "contract.pdf")
    assert pdf.path and Path(pdf.path).resolve().is_relative_to((data_dir / "media").resolve())
    assert "[Attachments, not opened: tool.exe (application/x-msdownload, 4 B)]" in inbound.text
    assert "contract.pdf" not in inbound.text.split("[Attachments, not opened:")[1]
    seen = await MediaReader(MediaSettings(), vision=False, transcriber=None).read([pdf])
    assert "Contract number 5521" in seen.text
    files = [p for p in data_dir.rglob("*") if p.is_file() and "media" in p.parts]
    assert [p.name for p in files] == [Path(pdf.path).name]


async def test_without_opt_in_nothing_is_stored(
    mail_server: MailServer, bot: str, data_dir: Path
) -> None:
    msg = make_mail(to=bot, subject="papers", body="see attached")
    msg.add_attachment(pdf_with_text("x"), maintype="application", subtype="pdf", filename="a.pdf")
    await send(mail_server, msg, bot)
    channel = EmailChannel(
        bot_settings(mail_server, bot), data_dir, media=MediaStore(data_dir, lifetime_s=60)
    )
    inbox = TestInbox()
    async with running(channel, inbox):
        inbound = await inbox.next(timeout=60)
    assert inbound.attachments == ()
    assert "[Attachments, not opened: a.pdf (application/pdf" in inbound.text
    assert not (data_dir / "media").exists()
