"""A spoken answer by mail through `squidd run` on the real Dovecot + Postfix: with
`[speech] reply = "always"`, the reply carries the answer as text and its voice note as an
`audio/ogg` attachment that decodes as Ogg/Opus of the length the scripted voice spoke."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import soundfile

from tests.channels.email.mailbox import (
    ALICE,
    MailServer,
    bot_email_section,
    inject,
    make_mail,
    replies_for_alice,
)
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.speech_server import SpeechServer, seconds_for

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]

ANSWER = "Your train leaves at 7:42 from platform 3."


async def test_the_reply_carries_the_spoken_answer_as_an_ogg_attachment(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    with FakeLLM(responder=lambda req: Reply(content=ANSWER)) as llm, SpeechServer() as speech:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-email-voice-0001",
            email=bot_email_section(mail_server, bot),
            speech={"base_url": speech.base_url, "reply": "always"},
        )
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        daemons.append(daemon)
        await daemon.wait_log("email_connected")
        msg = make_mail(to=bot, subject="my train", body="when does my train leave?")
        await inject(mail_server, msg, to=bot, sender=ALICE)
        [stored] = await replies_for_alice(mail_server, str(msg["Message-ID"]), timeout=60)
        await daemon.wait_event("reply_sent")
        assert await daemon.stop() == 0
    reply = stored.message
    body = reply.get_body(preferencelist=("plain",))
    assert body is not None and ANSWER in body.get_content()
    [attachment] = list(reply.iter_attachments())
    assert attachment.get_content_type() == "audio/ogg"
    assert attachment.get_filename() == "voice-reply.ogg"
    data = attachment.get_payload(decode=True)
    decoded = soundfile.info(io.BytesIO(data))
    assert (decoded.format, decoded.subtype) == ("OGG", "OPUS")
    assert abs(decoded.duration - seconds_for(ANSWER)) < 0.001
    assert speech.texts == [ANSWER]
