"""The provider chain through `squidd run` on Dovecot and Postfix: the primary model server
goes away between two mails of a conversation, each mail is answered once by the secondary,
and the primary answers again once its cooldown is over; the ledger names who answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.channels.email.mailbox import ALICE, MailServer, inject, make_mail, replies_for_alice
from tests.channels.email.test_daemon import write_config
from tests.support.config import provider
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]


def _first_line(request: dict[str, Any]) -> str:
    """The mail's text (the message the model gets starts with the subject line)."""
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    return [line for line in str(users[-1]["content"]).splitlines() if line.strip()][-1]


def _primary(request: dict[str, Any]) -> Reply:
    return Reply(content=f"A: {_first_line(request)}", usage=(30, 2, 0))


def _secondary(request: dict[str, Any]) -> Reply:
    return Reply(content=f"B: {_first_line(request)}", delay=0.3, usage=(30, 2, 0))


async def test_primary_away_then_back_each_mail_answered_once(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    with FakeLLM(responder=_primary) as primary, FakeLLM(responder=_secondary) as secondary:
        chain = {
            "providers": [provider("A", primary), provider("B", secondary)],
            "chain": ["A/model-a", "B/model-b"],
            "cooldown_s": 3.0,
            "failures_to_cool": 1,
            "connect_timeout_s": 1.0,
        }
        config = write_config(tmp_path, mail_server, bot, primary.base_url, llm=chain)
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        daemons.append(daemon)
        await daemon.wait_log("email_connected")

        async def mail(subject: str) -> str:
            message = make_mail(to=bot, subject=subject, body=f"{subject}\n")
            await inject(mail_server, message, to=bot, sender=ALICE)
            message_id = str(message["Message-ID"])
            [reply] = await replies_for_alice(mail_server, message_id, timeout=60)
            plain = reply.message.get_body(preferencelist=("plain",))
            assert plain is not None
            return str(plain.get_content()).splitlines()[0]

        assert await mail("first") == "A: first"
        port = primary.port
        primary.stop()
        assert [await mail(f"away {i}") for i in range(3)] == [f"B: away {i}" for i in range(3)]
        primary.start(port=port)
        answers = []
        for i in range(30):  # each mail answered; the primary again once its cooldown ends
            answers.append(await mail(f"back {i}"))
            if answers[-1].startswith("A:"):
                break
        assert answers[-1] == f"A: back {len(answers) - 1}"
        assert all(a == f"B: back {i}" for i, a in enumerate(answers[:-1]))
        assert await daemon.stop() == 0

    turns = [
        json.loads(line)
        for path in (tmp_path / "data" / "usage").glob("*.jsonl")
        for line in path.read_text().splitlines()
        if line
    ]
    providers = [t["provider"] for t in turns if t["purpose"] == "turn"]
    assert providers.count("A") == 2 and providers.count("B") == 3 + len(answers) - 1
    assert len(primary.chat_requests) == 2  # nothing asked of it while it cooled
