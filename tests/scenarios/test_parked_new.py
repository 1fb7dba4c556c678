"""A `/new` by mail that is parked after repeated failures, then sent again by the owner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.fs import make_private_dir, safe_name
from squidd.store.format import CURRENT
from tests.channels.email.mailbox import (
    DOMAIN,
    MailServer,
    eventually,
    inject,
    make_mail,
    replies_to,
    wait_for,
)
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM
from tests.support.scenario import email_config, mail_text, squidd

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]

ALICE = f"alice@{DOMAIN}"
MAX_ATTEMPTS = 3


def parked(data: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((data / "parked").glob("*.json"))]


def said(request: dict[str, Any]) -> str:
    """Everything the model was shown in one request."""
    return "\n".join(str(m.get("content")) for m in request["messages"])


async def test_a_parked_new_sent_again_starts_the_conversation_anew_without_the_model(
    mail_server: MailServer, mail_bot: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Alice has been mailing her bot about her holiday in Lisbon. She sends `/new` to start
    afresh — but the bot's machine has a fault where it keeps replies (a broken folder), so
    her `/new` fails every time it is tried and, after `gateway.max_attempts` tries, is
    parked: she gets no answer, and nothing is half done. The owner sees it in `squidd parked
    list`, repairs the folder and runs `squidd parked retry <id>`. Alice's `/new` now does
    what she meant: she is told a new conversation started, without the model being asked,
    and her next mail is answered without the Lisbon conversation in view."""
    fake_llm.push("Lisbon in May sounds lovely.", "Hello! How can I help?")
    config = email_config(
        tmp_path,
        fake_llm.base_url,
        mail_server,
        mail_bot,
        ALICE,
        gateway={"max_attempts": MAX_ATTEMPTS, "parked_poll_s": 0.2},
    )
    data = tmp_path / "data"
    new = make_mail(to=mail_bot, subject="/new", body="let's start over")
    new_id = str(new["Message-ID"])
    # The fault: where the reply to her `/new` is to be kept, a folder stands (made before the
    # daemon starts, in the data dir as the daemon makes it).
    make_private_dir(data / "gateway" / "outbox")
    (data / "format.json").write_text(json.dumps({"format": CURRENT, "squidd": "0.1.0"}))
    fault = data / "gateway" / "outbox" / f"{safe_name(f'email:{new_id}')}.json"
    make_private_dir(fault)
    daemon = DaemonProcess(config, tmp_path / "squidd.log")
    try:
        await daemon.wait_event("email_connected")
        holiday = make_mail(to=mail_bot, subject="holiday", body="I am going to Lisbon in May.")
        await inject(mail_server, holiday, to=mail_bot, sender=ALICE)
        await wait_for(mail_server, ALICE, replies_to(str(holiday["Message-ID"])), timeout=60)

        await inject(mail_server, new, to=mail_bot, sender=ALICE)
        await eventually(lambda: len(parked(data)) == 1, timeout=60)
        [item] = parked(data)
        assert item["attempts"] == MAX_ATTEMPTS
        listed = await anyio.to_thread.run_sync(lambda: squidd(config, "parked", "list"))
        assert str(item["id"]) in listed
        assert not await wait_for(mail_server, ALICE, replies_to(new_id), count=0)

        fault.rmdir()  # the owner's repair
        await anyio.to_thread.run_sync(lambda: squidd(config, "parked", "retry", str(item["id"])))
        [started] = await wait_for(mail_server, ALICE, replies_to(new_id), timeout=60)
        assert "Started a new conversation" in mail_text(started.message)
        await eventually(lambda: parked(data) == [], timeout=60)
        assert len(fake_llm.chat_requests) == 1  # `/new` never reached the model

        hello = make_mail(to=mail_bot, subject="hello", body="Hello again!")
        await inject(mail_server, hello, to=mail_bot, sender=ALICE)
        [answer] = await wait_for(mail_server, ALICE, replies_to(str(hello["Message-ID"])))
        assert "How can I help?" in mail_text(answer.message)
        assert await daemon.stop() == 0
    finally:
        daemon.kill()
    first, last = fake_llm.chat_requests
    assert "Lisbon" in said(first)
    assert "Hello again!" in said(last) and "Lisbon" not in said(last)
    assert "let's start over" not in said(last)
