"""Email attachments on the real Dovecot + Postfix: an allowed PDF is stored and read, a
disallowed type is only listed, a hostile file name never becomes a path; a reply carries
its files as attachments, and one past the size cap is named in the text instead."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from squidd.channels.email import EmailChannel
from squidd.config.media import MediaSettings
from squidd.core.models import Outbound
from squidd.core.reply_files import FileRef
from squidd.media.reader import MediaReader
from squidd.store.media import MediaStore
from tests.channels.email.mailbox import (
    MailServer,
    TestInbox,
    bot_settings,
    make_mail,
    replies_for_alice,
)
from tests.channels.email.test_channel import ALICE, running, send
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


def file_ref(path: Path, mime: str) -> FileRef:
    data = path.read_bytes()
    kind = "image" if mime.startswith("image/") else "file"
    return FileRef(str(path), kind, mime, len(data), hashlib.sha256(data).hexdigest(), path.name)


async def test_a_reply_carries_its_files_and_names_one_over_the_cap(
    mail_server: MailServer, bot: str, data_dir: Path, tmp_path: Path
) -> None:
    report, table, big = tmp_path / "report.pdf", tmp_path / "numbers.csv", tmp_path / "big.bin"
    report.write_bytes(pdf_with_text("Quarterly numbers"))
    table.write_bytes(b"month,total\njan,3\n")
    big.write_bytes(b"\x00" * 50_000)
    msg = make_mail(to=bot, sender=f"Alice <{ALICE}>", subject="report", body="send it please")
    msg_id = await send(mail_server, msg, bot)
    settings = bot_settings(mail_server, bot, max_reply_attachment_bytes=20_000)
    channel = EmailChannel(settings, data_dir)
    inbox = TestInbox()
    refs = (
        file_ref(report, "application/pdf"),
        file_ref(big, "application/octet-stream"),
        file_ref(table, "text/csv"),
    )
    async with running(channel, inbox):
        inbound = await inbox.next(timeout=60)
        await channel.send(
            Outbound(
                channel="email",
                target=inbound.sender,
                text="Here is the report.",
                session_id=inbound.session_id,
                in_reply_to=inbound,
                files=refs,
            )
        )
        await inbound.ack()
    [stored] = await replies_for_alice(mail_server, msg_id)
    reply = stored.message
    attached = {
        part.get_filename(): (part.get_content_type(), part.get_payload(decode=True))
        for part in reply.iter_attachments()
    }
    assert attached == {
        "report.pdf": ("application/pdf", report.read_bytes()),
        "numbers.csv": ("text/csv", table.read_bytes()),
    }
    body = reply.get_body(preferencelist=("plain",))
    assert body is not None
    text = body.get_content()
    assert text.startswith("Here is the report.")
    assert "big.bin (50000 bytes) is not attached" in text
