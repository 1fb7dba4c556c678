"""Chat commands by mail, through `squidd run` against Dovecot + Postfix: `/new` in the
subject (or on the body's first line) is answered without a model call, and the next mail's
turn no longer sees the earlier conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.channels.email.mailbox import (
    MailServer,
    bot_email_section,
    mail_from_alice,
    replies_for_alice,
)
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]


def _last_user(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


async def test_new_in_the_subject_starts_a_fresh_conversation_without_a_model_call(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    with FakeLLM(responder=lambda req: Reply(content=f"seen: {_last_user(req)[:40]}")) as llm:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-email-commands-0001",
            email=bot_email_section(mail_server, bot),
        )
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        daemons.append(daemon)
        await daemon.wait_log("email_connected")

        async def exchange(subject: str, body: str) -> str:
            msg = await mail_from_alice(mail_server, bot, subject=subject, body=body)
            [reply] = await replies_for_alice(mail_server, msg)
            plain = reply.message.get_body(preferencelist=("plain",))
            assert plain is not None
            return str(plain.get_content())

        await exchange("my cat", "My cat is called Zebedee.")
        answer = await exchange("/new", "please forget the old thread")
        assert "Started a new conversation" in answer
        assert len(llm.chat_requests) == 1  # the command never reached the model
        await exchange("a question", "What is my cat called?")
        assert len(llm.chat_requests) == 2
        assert "Zebedee" in str(llm.chat_requests[0]["messages"])
        assert "Zebedee" not in str(llm.chat_requests[1]["messages"])
        answer = await exchange("about my model", "/model\nwhich one is it?")
        assert answer.startswith("Model: ")
        assert len(llm.chat_requests) == 2
