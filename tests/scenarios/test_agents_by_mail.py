"""Scenario n (tests/scenarios/README.md): three agents on two mailboxes, told apart by a
+tag on the bot's mailbox and by a mailbox of the planner's own, through `squidd run` on
Dovecot + Postfix."""

from __future__ import annotations

from email.utils import parseaddr
from pathlib import Path
from typing import Any

import pytest

from tests.channels.email.mailbox import (
    ALICE,
    MailServer,
    inject,
    make_mail,
    replies_to,
    wait_delivered,
    wait_for,
)
from tests.channels.email.mailbox import bot_email_section as mailbox
from tests.support.config import provider
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM
from tests.support.scenario import email_config, mail_text

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]


def said(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


def plus(address: str, tag: str) -> str:
    local, _, domain = address.partition("@")
    return f"{local}+{tag}@{domain}"


async def mail(server: MailServer, box: str, to: str, **fields: Any) -> str:
    """Alice's mail to `to`, handed to Postfix and waited for in `box` (the IMAP account a
    plus-address is delivered to); its Message-ID."""
    message = make_mail(to=to, **fields)
    sent = str(message["Message-ID"])
    await inject(server, message, to=to, sender=ALICE, message_id="")
    await wait_delivered(server, box, sent)
    return sent


async def test_three_agents_by_tag_and_by_mailbox(
    mail_server: MailServer, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Alice mails the household's assistant three ways. To the bot's own address, the
    `home` agent answers. To the bot's address with `+work`, the `work` agent answers with
    its own model, and when she replies to that answer, `work` answers again (the thread
    stays with the agent she wrote to). To the planner's own mailbox, the `planner` agent
    answers from the planner's address. No agent's model sees another's conversation."""
    bot = mail_server.take_bot()
    planner_box = mail_server.take_bot()
    fake_llm.push("Home here: the plants are watered.")
    own = mailbox(mail_server, planner_box)
    with FakeLLM() as work_model, FakeLLM() as planner_model:
        work_model.push("Work here: the report is due Friday.", "Work again: Friday at noon.")
        planner_model.push("Planner here: dentist on Tuesday.")
        config = email_config(
            tmp_path,
            fake_llm.base_url,
            mail_server,
            bot,
            ALICE,
            llm={
                "providers": [
                    provider("home", fake_llm),
                    provider("work", work_model),
                    provider("plan", planner_model),
                ],
                "chain": ["home/model-h"],
            },
            agents={
                "list": [
                    {"name": "home"},
                    {"name": "work", "chain": ["work/model-w"]},
                    {
                        "name": "planner",
                        "chain": ["plan/model-p"],
                        "email": {"address": planner_box, "password": own["password"]},
                    },
                ]
            },
        )
        daemon = DaemonProcess(config, tmp_path / "squidd.log")
        try:
            await daemon.wait_event("email_connected", count=2)
            to_home = await mail(mail_server, bot, bot, subject="plants", body="Plants?")
            to_work = await mail(
                mail_server, bot, plus(bot, "work"), subject="report", body="When is it due?"
            )
            to_plan = await mail(
                mail_server, planner_box, planner_box, subject="week", body="My week?"
            )
            [home_answer] = await wait_for(mail_server, ALICE, replies_to(to_home), timeout=60)
            [work_answer] = await wait_for(mail_server, ALICE, replies_to(to_work), timeout=60)
            [plan_answer] = await wait_for(mail_server, ALICE, replies_to(to_plan), timeout=60)

            # She answers the work agent's mail with her mail client's "Reply".
            answered = work_answer.message
            back_to = parseaddr(str(answered["Reply-To"] or answered["From"]))[1]
            follow_up = await mail(
                mail_server,
                bot,
                back_to,
                subject=f"Re: {answered['Subject']}",
                body="What time on Friday?",
                headers={
                    "In-Reply-To": str(answered["Message-ID"]),
                    "References": f"{to_work} {answered['Message-ID']}",
                },
            )
            [again] = await wait_for(mail_server, ALICE, replies_to(follow_up), timeout=60)
            assert await daemon.stop() == 0
        finally:
            daemon.kill()

    assert "plants are watered" in mail_text(home_answer.message)
    assert "report is due Friday" in mail_text(work_answer.message)
    assert "dentist on Tuesday" in mail_text(plan_answer.message)
    assert "Friday at noon" in mail_text(again.message)
    assert parseaddr(str(plan_answer.message["From"]))[1] == planner_box
    assert parseaddr(str(home_answer.message["From"]))[1] == bot
    assert back_to == plus(bot, "work")  # her "Reply" goes back to the +tag she wrote to
    assert home_answer.message["Reply-To"] is None
    [home_asked] = fake_llm.chat_requests
    assert "Plants?" in said(home_asked) and "due" not in said(home_asked)
    first, second = work_model.chat_requests
    assert "When is it due?" in said(first) and "Plants?" not in said(first)
    assert "report is due Friday" in said(second)  # the same conversation, in view
    [planned] = planner_model.chat_requests
    assert "My week?" in said(planned) and "Plants?" not in said(planned)
