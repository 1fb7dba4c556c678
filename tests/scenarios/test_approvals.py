"""An approval answered the ways a person answers it: on Matrix (default debounce, answers
streaming) with a plain "yes", a ✅ on the question, or `/approve <id>`; by mail with a
reply "yes"."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.store.audit import AuditFile
from tests.channels.email.mailbox import (
    DOMAIN,
    MailServer,
    find,
    inject,
    make_mail,
    replies_to,
    wait_for,
)
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.matrix_daemon import MatrixScene
from tests.support.scenario import (
    APPROVAL_RE,
    answer_mail,
    ask_until_approval,
    email_config,
    mail_text,
    ran,
    react,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ALICE = f"alice@{DOMAIN}"

# Both longer than `matrix.stream_first_chars`: each streams into the chat as it is written.
BEFORE = " ".join(["I will look at the logs first; that needs a shell command."] * 5)
AFTER = "\n\n".join(f"Finding {i}: the logs are rotated and nothing is lost." for i in range(8))
SHELL = Reply(content=BEFORE, tool_calls=[("shell", {"command": "echo ran >> ran.txt"})])


@pytest.mark.matrix
@pytest.mark.parametrize("answer", ["yes", "reaction", "command"])
async def test_an_approval_on_matrix_with_streaming_and_the_default_debounce(
    answer: str,
    scene: MatrixScene,
) -> None:
    """Alice asks her bot, in their direct chat, to check the logs. The answer streams in,
    then the bot asks before running a shell command. She answers as she likes — a plain
    "yes", a ✅ on the question, or `/approve <id>` — and does not wait for anything else
    (the bot's usual 1.5 s wait for more messages is on). The command runs once, the rest
    of the answer streams in and shows whole; her answer is not a turn of its own."""
    scene.fake_llm.push(SHELL, AFTER)
    alice, daemon, room, chat, asked, prompt, question = await ask_until_approval(
        scene, "please check the logs"
    )
    [(streaming, shown)] = [m for m in chat.replies(asked) if m[0] is not prompt]
    assert shown.startswith("I will look at the logs first")
    assert ran(scene.tmp_path) == 0
    if answer == "yes":
        said = await alice.send(room, "yes")
    elif answer == "reaction":
        said = await react(alice, room, prompt.event.event_id, "✅")
    else:
        said = await alice.send(room, f"/approve {question}")
    await alice.wait_for(lambda: AFTER in chat.texts(), "the whole answer", 60)
    if answer != "reaction":  # her answer was taken: ✅ on it, never ❌ (a reaction: none)
        await alice.wait_for(lambda: chat.marks(said) == {"✅"}, "✅ on her answer", 60)
    scene.fake_llm.push("Glad to help.")
    thanks = await alice.send(room, "thanks")
    assert await chat.wait_reply(thanks) == "Glad to help."
    assert await daemon.stop() == 0

    assert ran(scene.tmp_path) == 1
    assert chat.texts().count(AFTER) == 1
    finished = [m.event.event_id for m, text in chat.replies(asked) if text == AFTER]
    assert finished == [streaming.event.event_id]  # the streamed message, finished
    assert len(chat.containing("Approval needed")) == 1
    assert len(scene.fake_llm.chat_requests) == 3  # the question's answer was never a turn
    records = AuditFile(scene.tmp_path / "data").records()
    assert [(r["decision"], r["by"]) for r in records] == [("approved", alice.user_id)]


@pytest.mark.mail
async def test_an_approval_by_mail_answered_with_a_reply_yes(
    mail_server: MailServer, mail_bot: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Alice mails her bot to check the logs. Its reply is the question, naming the exact
    command. She answers it from her mail client — "Yes", above the quoted question — and
    the command runs once; the answer arrives as a reply to her first mail, and her "Yes"
    is taken (seen) without an answer of its own."""
    fake_llm.push(SHELL, AFTER)
    config = email_config(tmp_path, fake_llm.base_url, mail_server, mail_bot, ALICE)
    daemon = DaemonProcess(config, tmp_path / "squidd.log")
    try:
        await daemon.wait_event("email_connected")
        first = make_mail(to=mail_bot, subject="logs", body="please check the logs")
        asked = str(first["Message-ID"])
        await inject(mail_server, first, to=mail_bot, sender=ALICE)
        [prompt] = await wait_for(mail_server, ALICE, replies_to(asked), timeout=60)
        found = APPROVAL_RE.search(mail_text(prompt.message))
        assert found is not None and found.group(2) == "echo ran >> ran.txt"
        assert ran(tmp_path) == 0
        yes = answer_mail(prompt.message, mail_bot, "Yes")
        await inject(mail_server, yes, to=mail_bot, sender=ALICE)
        replies = await wait_for(mail_server, ALICE, replies_to(asked), count=2, timeout=60)
        assert AFTER in mail_text(replies[1].message)
        await daemon.wait_event("email_acknowledged", count=2)
        assert await daemon.stop() == 0
    finally:
        daemon.kill()
    assert ran(tmp_path) == 1
    assert "\\Seen" in (await find(mail_server, mail_bot, str(yes["Message-ID"]))).flags
    assert not await wait_for(mail_server, ALICE, replies_to(str(yes["Message-ID"])), count=0)
    assert len(fake_llm.chat_requests) == 2
    records = AuditFile(tmp_path / "data").records()
    assert [(r["decision"], r["by"]) for r in records] == [("approved", ALICE)]
