"""A parked mail keeps its chat command, through `squidd run` against Dovecot + Postfix.

A mail whose subject is `/new` fails with a defect before its reply is kept (its outbox
entry cannot be read: a directory stands where the file goes), `gateway.max_attempts`
times, and is parked without a reply. Sent again with `squidd parked retry`, it is the
command it was: the conversation starts anew (its generation in conversations.json moves)
and the model is never asked. A parked item that lost `Inbound.command` would hand the
mail's body to the model instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from squidd.fs import make_private_dir, safe_name
from squidd.store.format import CURRENT
from tests.channels.email.mailbox import (
    ALICE,
    MailServer,
    bot_email_section,
    eventually,
    inject,
    make_mail,
    replies_for_alice,
)
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess, daemon_env, squidd_argv
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]

MAX_ATTEMPTS = 3


def _parked(data: Path) -> list[dict[str, object]]:
    folder = data / "parked"
    if not folder.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def _generations(data: Path) -> list[object]:
    path = data / "conversations.json"
    if not path.exists():
        return []
    return [entry.get("generation") for entry in json.loads(path.read_text()).values()]


async def test_a_parked_new_sent_again_starts_a_new_conversation_without_a_model_call(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    with FakeLLM(responder=lambda req: Reply(content="a model answer")) as llm:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-email-parked-command-0001",
            email=bot_email_section(mail_server, bot),
            gateway={
                "max_attempts": MAX_ATTEMPTS,
                "delivery_retry_initial_s": 0.2,
                "delivery_retry_max_s": 0.5,
                "parked_poll_s": 0.2,
            },
        )
        data = tmp_path / "data"
        mail = make_mail(to=bot, subject="/new", body="please forget the old thread")
        message_id = str(mail["Message-ID"])
        # The data dir as the daemon makes it, with the mail's outbox entry unreadable: each
        # attempt fails before the turn, a defect (not a passing failure) every time.
        make_private_dir(data)
        (data / "format.json").write_text(json.dumps({"format": CURRENT, "squidd": "0.1.0"}))
        outbox = data / "gateway" / "outbox"
        make_private_dir(outbox)
        blocker = outbox / f"{safe_name(f'email:{message_id}')}.json"
        make_private_dir(blocker)

        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        daemons.append(daemon)
        await daemon.wait_log("email_connected")
        await inject(mail_server, mail, to=bot, sender=ALICE)
        await eventually(lambda: len(_parked(data)) == 1, timeout=60)
        (item,) = _parked(data)
        assert item["attempts"] == MAX_ATTEMPTS and item["error"] == "StorageError"
        assert item["reply"] is None  # parked before a reply was kept: a retry runs it again
        blocker.rmdir()  # the fix is in
        assert _generations(data) == []

        retry = await anyio.run_process(
            squidd_argv(config, "parked", "retry", str(item["id"])), env=daemon_env(), check=False
        )
        assert retry.returncode == 0, retry.stderr.decode()
        [reply] = await replies_for_alice(mail_server, message_id, timeout=60)
        plain = reply.message.get_body(preferencelist=("plain",))
        assert plain is not None
        assert "Started a new conversation" in str(plain.get_content())
        await eventually(lambda: _parked(data) == [], timeout=60)
        assert _generations(data) == [1]
        assert llm.chat_requests == []  # the command never reached the model
