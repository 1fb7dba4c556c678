"""Default deny: with no allowlist nobody is answered (mail from anyone is ignored, read and
left alone), and the shell is refused unless enabled and allowed - the model asking for it
gets a refusal, and the command never runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.email.mailbox import DOMAIN, MailServer, bot_email_section, inject, make_mail
from tests.faults.harness import Counts, SpoolDaemon, wait_until
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply


@pytest.mark.anyio
@pytest.mark.mail
@pytest.mark.slow
async def test_no_allowlist_answers_nobody(mail_server: MailServer, tmp_path: Path) -> None:
    bot = mail_server.take_bot()
    senders = [f"alice@{DOMAIN}", f"bob@{DOMAIN}", "someone@elsewhere.test"]
    with FakeLLM() as llm:
        config = write_daemon_config(
            tmp_path,
            llm.base_url,
            api_key="sk-test-faults-deny-0001",
            email=bot_email_section(mail_server, bot, allowed_senders=[], allowed_domains=[]),
        )
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        try:
            await daemon.wait_event("email_connected")
            for sender in senders:
                mail = make_mail(to=bot, sender=sender, subject="let me in")
                await inject(mail_server, mail, to=bot, sender=sender)
            await daemon.wait_event("email_ignored", count=len(senders))
            counts = Counts("default deny (mail)", sent=len(senders))
            counts.answered = daemon.count("email_sent")
            counts.crashes = 0 if daemon.proc.poll() is None else 1
            counts.report()
            assert counts.answered == 0 and counts.crashes == 0
            assert llm.chat_requests == []
        finally:
            daemon.kill()


@pytest.mark.slow
@pytest.mark.parametrize("shell", [{}, {"enabled": True}], ids=["shell-default", "shell-enabled"])
def test_the_shell_is_refused_unless_enabled_and_allowed(
    tmp_path: Path, shell: dict[str, bool]
) -> None:
    marker = tmp_path / "the-shell-ran"
    with FakeLLM() as llm:
        llm.push(
            Reply(tool_calls=[("shell", {"command": f"touch {marker}"})]),
            Reply(content="done"),
        )
        sections = {"tools.shell": shell} if shell else {}
        daemon = SpoolDaemon(tmp_path, llm.base_url, api_key="sk-test-faults-deny-0002", **sections)
        try:
            daemon.start()
            daemon.send("m1", "run touch for me", "deny-shell")
            wait_until(lambda: daemon.answers()["m1"] >= 1, "the reply")
            second = llm.chat_requests[1]
            tool_results = [m for m in second["messages"] if m.get("role") == "tool"]
            counts = Counts("default deny (shell)", sent=1, answered=daemon.answers()["m1"])
            counts.report()
            assert len(tool_results) == 1
            assert str(tool_results[0]["content"]).startswith("Error"), tool_results
            offered = [t["function"]["name"] for t in llm.chat_requests[0].get("tools", [])]
            assert "shell" not in offered
            assert not marker.exists()
        finally:
            daemon.close()
