"""`squidd run` with the email channel, as a real process against Dovecot + Postfix and the
scripted LLM server: exactly one reply across a SIGKILL, and a reply that waits for SMTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.channels.email.mailbox import (
    ALICE,
    DOMAIN,
    MailServer,
    append,
    bot_email_section,
    find,
    inject,
    make_mail,
    replies_for_alice,
)
from tests.support.config import write_daemon_config
from tests.support.daemon import DaemonProcess
from tests.support.fake_llm import FakeLLM, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.mail, pytest.mark.slow]

# Everyone at the test domain is answered, not only Alice.
WHOLE_DOMAIN: dict[str, Any] = {"allowed_senders": [], "allowed_domains": [DOMAIN]}


def write_config(
    tmp: Path,
    server: MailServer,
    bot: str,
    llm_url: str,
    *,
    gateway: Mapping[str, Any] | None = None,
    llm: Mapping[str, Any] | None = None,
    agents: Mapping[str, Any] | None = None,
    **email: Any,
) -> Path:
    """The daemon's config: the bot's account, short delays, and `gateway`/`email` extras
    (`llm`: keys of the model's section, a chain of providers, say)."""
    return write_daemon_config(
        tmp,
        llm_url,
        api_key="sk-test-email-daemon-0001",
        gateway={
            "delivery_retry_initial_s": 0.2,
            "delivery_retry_max_s": 1.0,
            "restart_initial_delay_s": 0.2,
            "restart_max_delay_s": 1.0,
            **(gateway or {}),
        },
        email=bot_email_section(
            server, bot, reconnect_initial_delay_s=0.2, reconnect_max_delay_s=1.0, **email
        ),
        llm=llm or {},
        agents=agents or {},
    )


class GatedLLM:
    """Answers each request with `answer: <text>`, but holds the first one until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.first_seen = threading.Event()
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            self.first_seen.set()
            self.release.wait(120)
        user = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        return Reply(content=f"answer: {user.splitlines()[0]}")


async def wait_event(event: threading.Event, timeout: float = 60) -> None:
    assert await anyio.to_thread.run_sync(event.wait, timeout), "the LLM was never asked"


async def test_sigkill_after_receiving_and_before_replying_gives_exactly_one_reply(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    llm = GatedLLM()
    with FakeLLM(responder=llm) as server:
        config = write_config(tmp_path, mail_server, bot, server.base_url)
        first = DaemonProcess(config, tmp_path / "first.log")
        daemons.append(first)
        await first.wait_log("email_connected")
        msg = make_mail(to=bot, subject="survive the crash")
        await inject(mail_server, msg, to=bot, sender=ALICE)
        msg_id = str(msg["Message-ID"])
        # The daemon took the mail and is in the middle of the turn: kill it there.
        await wait_event(llm.first_seen)
        first.kill()
        llm.release.set()
        assert "\\Seen" not in (await find(mail_server, bot, msg_id)).flags

        second = DaemonProcess(config, tmp_path / "second.log")
        daemons.append(second)
        [reply] = await replies_for_alice(mail_server, msg_id, timeout=60)
        assert reply.message["Subject"] == "Re: survive the crash"
        # A later mail of the same conversation is answered after it: by then any second
        # answer to the first would have been sent too.
        later = make_mail(to=bot, subject="and after")
        await inject(mail_server, later, to=bot, sender=ALICE)
        await replies_for_alice(mail_server, str(later["Message-ID"]), timeout=60)
        assert len(await replies_for_alice(mail_server, msg_id)) == 1
        assert "\\Seen" in (await find(mail_server, bot, msg_id)).flags
        received = [e for e in second.events() if e.get("event") == "email_received"]
        assert (received[0]["message_id"], received[0]["redelivery"]) == (msg_id, True)


async def test_smtp_down_then_back_the_reply_arrives_and_only_then_is_the_mail_seen(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    with FakeLLM(responder=lambda req: Reply(content="here you go")) as server:
        config = write_config(tmp_path, mail_server, bot, server.base_url)
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        daemons.append(daemon)
        await daemon.wait_log("email_connected")
        msg = make_mail(to=bot, subject="are you there")
        msg_id = str(msg["Message-ID"])
        await mail_server.stop_postfix()
        try:
            await append(mail_server, bot, msg)  # arrives while SMTP is down
            await daemon.wait_log("reply_delivery_failed")
            await daemon.wait_log('"attempt": 2')
            assert "\\Seen" not in (await find(mail_server, bot, msg_id)).flags
        finally:
            await mail_server.start_postfix()
        [reply] = await replies_for_alice(mail_server, msg_id, timeout=60)
        assert reply.message["Subject"] == "Re: are you there"
        await daemon.wait_log("email_acknowledged")
        assert "\\Seen" in (await find(mail_server, bot, msg_id)).flags


async def test_hostile_sender_and_attachment_names_stay_inside_the_data_dir(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    hostile = f'"../../../../tmp/escaped"@{DOMAIN}'
    with FakeLLM(responder=lambda req: Reply(content="noted")) as server:
        config = write_config(tmp_path, mail_server, bot, server.base_url, **WHOLE_DOMAIN)
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        daemons.append(daemon)
        await daemon.wait_log("email_connected")
        msg = make_mail(to=bot, sender=hostile, subject="../../../../tmp/escaped-subject")
        msg.add_attachment(b"x", maintype="text", subtype="plain", filename="../../escaped.txt")
        await inject(mail_server, msg, to=bot, sender=ALICE)
        # The turn ran (its history written); the reply cannot be delivered to that address,
        # and never will: it is given up at once.
        await daemon.wait_event("reply_rejected")
        request = server.chat_requests[0]
        assert "../../escaped.txt (text/plain, 1 B)" in request["messages"][-1]["content"]
    data = (tmp_path / "data").resolve()
    names = []
    for path in data.rglob("*"):
        assert path.resolve().is_relative_to(data)
        names.append(path.name)
    # the conversation's files exist, under a sanitised name
    assert any(n.startswith("tmp_escaped_example.test-") for n in names), names
    assert not list(Path("/tmp").glob("escaped*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "daemon.log", "data"]


async def test_a_reply_refused_for_good_is_given_up_at_once_and_blocks_nothing(
    mail_server: MailServer, bot: str, tmp_path: Path, daemons: list[DaemonProcess]
) -> None:
    """Postfix refuses the reply to an unknown user of its domain with 550. One attempt,
    one error line, no outbox entry; the mail is flagged and left unread; the next mail
    is answered; SIGTERM does not wait out the (long) shutdown grace for it."""
    ghost = f"ghost@{DOMAIN}"
    with FakeLLM(responder=lambda req: Reply(content="hello")) as server:
        config = write_config(
            tmp_path,
            mail_server,
            bot,
            server.base_url,
            gateway={"shutdown_grace_s": 600},
            **WHOLE_DOMAIN,
        )
        daemon = DaemonProcess(config, tmp_path / "daemon.log")
        daemons.append(daemon)
        await daemon.wait_log("email_connected")
        refused = make_mail(to=bot, sender=ghost, subject="nobody lives here")
        await inject(mail_server, refused, to=bot, sender=ghost)
        await daemon.wait_event("email_left_flagged")
        after = make_mail(to=bot, subject="and me?")
        await inject(mail_server, after, to=bot, sender=ALICE)
        await replies_for_alice(mail_server, str(after["Message-ID"]), timeout=60)
        await daemon.wait_event("email_acknowledged")
        # A bound far below the grace: the stop must not wait for the refused reply.
        stopping = time.monotonic()
        assert await daemon.stop(timeout=60) == 0
        print(f"\nSIGTERM to exit with a refused reply behind: {time.monotonic() - stopping:.2f} s")
    assert daemon.count("reply_rejected") == 1
    assert daemon.count("reply_delivery_failed") == 0
    assert daemon.count("shutdown_grace_expired") == 0
    assert len(server.chat_requests) == 2
    stored = await find(mail_server, bot, str(refused["Message-ID"]))
    assert "\\Flagged" in stored.flags and "\\Seen" not in stored.flags
    assert not list((tmp_path / "data" / "gateway" / "outbox").glob("*"))
