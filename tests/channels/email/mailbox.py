"""Test-side mail tools: the running Dovecot+Postfix, injecting mail, reading mailboxes.

The tests play two roles the channel must not rely on:
* the **sender's world**: mail is handed to Postfix over plain SMTP as it would arrive from
  the internet (or APPENDed straight into a mailbox when Postfix is down on purpose);
* the **receiving provider's border server**: it is where `Authentication-Results` comes
  from. Postfix here checks no DKIM/DMARC, so the tests write that header themselves, with
  the authserv-id the channel is told to trust (`TRUSTED_ID`), exactly as a provider's MX
  would after verifying the sender. A spoofing test leaves it out, or writes a failing one,
  or one from another server.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import parseaddr
from pathlib import Path
from typing import Any

import aioimaplib
import aiosmtplib
import anyio

from squidd.config.email import EmailSettings
from squidd.core.models import Inbound
from squidd.core.ports import ChannelState
from tests.support.doubles import memory_poison

HERE = Path(__file__).resolve().parent
SERVERS = HERE.parent.parent / "servers" / "mail"
TRUSTED_ID = "mx.example.test"
DOMAIN = "example.test"
# The one person the test bots answer (`allowed_senders`) and the usual sender of test mail.
ALICE = f"alice@{DOMAIN}"
PASSWORD = "secret-pw-1"
BOTS = [f"bot{i}" for i in range(1, 201)]  # a mailbox of its own for every test of a worker
HUMANS = ["alice", "bob"]


@dataclass
class MailServer:
    data: Path
    host: str
    imap_port: int
    imaps_port: int
    smtp_port: int
    ca_file: Path
    postfix_conf: Path
    _free_bots: list[str] = field(default_factory=lambda: list(BOTS))

    @classmethod
    def from_env_file(cls, data: Path) -> MailServer:
        env: dict[str, str] = {}
        for line in (data / "mail.env").read_text().splitlines():
            key, _, value = line.partition("=")
            env[key] = value
        return cls(
            data=data,
            host=env["MAIL_HOST"],
            imap_port=int(env["MAIL_IMAP_PORT"]),
            imaps_port=int(env["MAIL_IMAPS_PORT"]),
            smtp_port=int(env["MAIL_SMTP_PORT"]),
            ca_file=Path(env["MAIL_CA_FILE"]),
            postfix_conf=Path(env["MAIL_POSTFIX_CONF"]),
        )

    def take_bot(self) -> str:
        """A bot account no other test used: its INBOX starts empty."""
        return f"{self._free_bots.pop(0)}@{DOMAIN}"

    async def kick(self, user: str) -> None:
        """Make Dovecot drop every connection of `user` (what a server restart does)."""
        await anyio.run_process(
            ["doveadm", "-c", str(self.data / "dovecot.conf"), "kick", user], check=True
        )

    # --- Postfix down and up again (for the "SMTP down" tests) ---------------------------

    def _postfix(self, action: str) -> None:
        subprocess.run(
            ["postfix", "-c", str(self.postfix_conf), action],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def _master_pid_file(self) -> Path:
        main_cf = (self.postfix_conf / "main.cf").read_text()
        spool = re.search(r"^queue_directory = (.+)$", main_cf, re.M)
        assert spool is not None
        return Path(spool.group(1)) / "pid" / "master.pid"

    def _master_running(self) -> bool:
        try:
            return _running(int(self._master_pid_file().read_text().strip()))
        except (OSError, ValueError):
            return False

    def _stop_postfix(self) -> None:
        pid = int(self._master_pid_file().read_text().strip())
        self._postfix("stop")
        # `postfix stop` returns before the master has exited; a start before that fails.
        deadline = time.monotonic() + 30
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pid), "postfix did not stop"
        # The master's smtpd children hold the listening socket a little longer (on a busy
        # machine, noticeably): wait for them too, or the next start cannot bind the port.
        while _port_open(self.host, self.smtp_port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _port_open(self.host, self.smtp_port), "postfix's port stayed open"

    def _start_postfix(self) -> None:
        if not self._master_running():
            self._postfix("start")
        deadline = time.monotonic() + 30
        while not _port_open(self.host, self.smtp_port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _port_open(self.host, self.smtp_port), "postfix did not start listening"
        pid = self._master_pid_file().read_text().strip()
        (self.data / "pids" / "postfix.pid").write_text(pid + "\n")

    async def stop_postfix(self) -> None:
        await anyio.to_thread.run_sync(self._stop_postfix)

    async def start_postfix(self) -> None:
        await anyio.to_thread.run_sync(self._start_postfix)


def _running(pid: int) -> bool:
    """Alive and not a zombie (a non-init PID 1 may reap late)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return not re.search(r"^State:\s*Z", status, re.M)


def _port_open(host: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


PORT_ATTEMPTS = 3


def start_servers(data: Path) -> MailServer:
    users = " ".join(f"{u}:{PASSWORD}" for u in [*BOTS, *HUMANS])
    env = {**os.environ, "MAIL_DOMAIN": DOMAIN, "MAIL_USERS": users}
    for key in [k for k in env if k.endswith("_PORT") and k.startswith("MAIL_")]:
        del env[key]
    for attempt in range(1, PORT_ATTEMPTS + 1):
        # stderr to a file, not a pipe: the servers it starts keep their inherited handles
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errors:
            done = subprocess.run(
                ["bash", str(SERVERS / "start.sh"), str(data)],
                env=env,
                timeout=900,
                stderr=errors,
                check=False,
            )
            errors.seek(0)
            said = errors.read()
        sys.stderr.write(said)
        # A port found free can be taken before the server binds it (another worker's
        # server, or the kernel handing it out as a client's source port): new ports, again.
        if done.returncode == 0 or "Address already in use" not in said:
            break
        sys.stderr.write(f"mail servers: a port was taken meanwhile, try {attempt + 1}\n")
    done.check_returncode()
    return MailServer.from_env_file(data)


def stop_servers(data: Path) -> None:
    subprocess.run(
        ["bash", str(SERVERS / "stop.sh"), str(data), "--purge"], check=False, timeout=60
    )


# --- settings ---------------------------------------------------------------------------


def bot_email_section(server: MailServer, bot: str, **overrides: Any) -> dict[str, Any]:
    """The `[email]` keys of a bot account on the test servers: the one source of them, for
    the channel in this process (`bot_settings`) and a daemon's config file alike.

    `backlog = "answer"`: most tests put mail in the box before squidd first looks at it
    and expect it answered; the tests of the default (`skip`) say so."""
    values: dict[str, Any] = {
        "enabled": True,
        "backlog": "answer",
        "address": bot,
        "username": bot,
        "password": PASSWORD,
        "imap_host": server.host,
        "imap_port": server.imaps_port,
        "imap_security": "tls",
        "smtp_host": server.host,
        "smtp_port": server.smtp_port,
        "smtp_security": "starttls",
        "ca_file": server.ca_file,
        "allowed_senders": [ALICE],
        "trusted_authserv_id": TRUSTED_ID,
        "timeout_s": 10,
        "reconnect_initial_delay_s": 0.1,
        "reconnect_max_delay_s": 1,
        "poll_interval_s": 3600,
    }
    return {**values, **overrides}


def bot_settings(server: MailServer, bot: str, **overrides: Any) -> EmailSettings:
    return EmailSettings(**bot_email_section(server, bot, **overrides))


# --- composing and injecting mail -------------------------------------------------------


def new_message_id() -> str:
    return f"<{uuid.uuid4().hex}@sender.{DOMAIN}>"


def auth_pass(domain: str = DOMAIN, authserv_id: str = TRUSTED_ID) -> str:
    return f"{authserv_id}; dkim=pass header.d={domain}; spf=pass; dmarc=pass header.from={domain}"


def make_mail(
    *,
    to: str,
    sender: str = ALICE,
    subject: str = "Hello",
    body: str = "Hi there, how are you?",
    auth: str | None = "pass",
    headers: dict[str, str] | None = None,
) -> EmailMessage:
    msg = EmailMessage()
    if auth == "pass":
        msg["Authentication-Results"] = auth_pass(parseaddr(sender)[1].rpartition("@")[2])
    elif auth:
        msg["Authentication-Results"] = auth
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Message-ID"] = new_message_id()
    msg["Date"] = "Mon, 02 Mar 2026 12:00:00 +0000"
    for key, value in (headers or {}).items():
        msg[key] = value
    msg.set_content(body)
    return msg


async def inject(
    server: MailServer,
    message: EmailMessage | bytes,
    *,
    to: str,
    sender: str,
    message_id: str | None = None,
) -> None:
    """Hand mail to Postfix as the internet would (plain SMTP, no login), and wait until it
    is in the mailbox: Postfix delivers concurrently, so tests that need an order wait."""
    await aiosmtplib.send(
        message,
        sender=sender,
        recipients=[to],
        hostname=server.host,
        port=server.smtp_port,
        start_tls=False,
        timeout=60,
    )
    if message_id is None and isinstance(message, EmailMessage):
        message_id = str(message["Message-ID"])
    if message_id:
        await wait_delivered(server, to, message_id)


async def wait_delivered(server: MailServer, user: str, message_id: str) -> None:
    async with imap_session(server, user) as client:
        with anyio.fail_after(60):
            while True:
                response = await client.uid_search("HEADER", "Message-ID", f'"{message_id}"')
                if response.result == "OK" and any(
                    isinstance(line, bytes) and line.strip().isdigit() for line in response.lines
                ):
                    return
                await anyio.sleep(0.05)


# --- reading mailboxes ------------------------------------------------------------------


@asynccontextmanager
async def imap_session(
    server: MailServer, user: str, folder: str = "INBOX"
) -> AsyncIterator[aioimaplib.IMAP4]:
    """A logged-in client with `folder` selected; logged out and its socket closed after."""
    gone = anyio.Event()
    client = aioimaplib.IMAP4(
        host=server.host, port=server.imap_port, timeout=30, conn_lost_cb=lambda _: gone.set()
    )
    try:
        await client.wait_hello_from_server()
        response = await client.login(user, PASSWORD)
        assert response.result == "OK", response
        response = await client.select(folder)
        assert response.result == "OK", response
        yield client
        await client.logout()
    finally:
        transport = client.protocol.transport
        if transport is not None and not gone.is_set():
            transport.close()
        with anyio.move_on_after(5):
            await gone.wait()


async def append(server: MailServer, user: str, message: EmailMessage) -> None:
    """Put mail straight into a mailbox (when Postfix is down on purpose)."""
    async with imap_session(server, user) as client:
        response = await client.append(message.as_bytes(), mailbox="INBOX")
        assert response.result == "OK", response


@dataclass
class Stored:
    uid: int
    flags: set[str]
    message: EmailMessage


async def read_mailbox(server: MailServer, user: str, folder: str = "INBOX") -> list[Stored]:
    async with imap_session(server, user, folder) as client:
        response = await client.uid("fetch", "1:*", "(UID FLAGS BODY.PEEK[])")
        out: list[Stored] = []
        lines = response.lines
        for index, line in enumerate(lines):
            if isinstance(line, bytes) and b"FETCH" in line and index + 1 < len(lines):
                uid = re.search(rb"UID (\d+)", line)
                flags = re.search(rb"FLAGS \(([^)]*)\)", line)
                if uid is None or not isinstance(lines[index + 1], bytearray):
                    continue
                msg = BytesParser(policy=policy.default).parsebytes(bytes(lines[index + 1]))
                assert isinstance(msg, EmailMessage)
                out.append(
                    Stored(
                        uid=int(uid.group(1)),
                        flags=set(flags.group(1).decode().split()) if flags else set(),
                        message=msg,
                    )
                )
        return out


async def find(server: MailServer, user: str, message_id: str) -> Stored:
    for stored in await read_mailbox(server, user):
        if stored.message["Message-ID"] == message_id:
            return stored
    raise AssertionError(f"{message_id} not in {user}'s mailbox")


async def wait_for(
    server: MailServer,
    user: str,
    predicate: Callable[[EmailMessage], bool],
    *,
    count: int = 1,
    timeout: float = 30,
) -> list[Stored]:
    """Wait until `user`'s INBOX holds `count` mails matching `predicate` (a bound)."""
    with anyio.fail_after(timeout):
        while True:
            found = [s for s in await read_mailbox(server, user) if predicate(s.message)]
            if len(found) >= count:
                return found
            await anyio.sleep(0.2)


async def eventually(check: Callable[[], bool], timeout: float = 30) -> None:
    """Poll `check` until it holds (a bound, not a speed assertion)."""
    with anyio.fail_after(timeout):
        while not check():  # noqa: ASYNC110 - polls state that has no event to wait on
            await anyio.sleep(0.05)


def replies_to(message_id: str) -> Callable[[EmailMessage], bool]:
    return lambda m: m["In-Reply-To"] == message_id


async def mail_from_alice(server: MailServer, bot: str, **fields: Any) -> str:
    """A mail from Alice to `bot` (`make_mail`'s `fields`) handed to Postfix and in the
    box; its Message-ID."""
    message = make_mail(to=bot, **fields)
    await inject(server, message, to=bot, sender=ALICE)
    return str(message["Message-ID"])


async def replies_for_alice(
    server: MailServer, message_id: str, *, count: int = 1, timeout: float = 30
) -> list[Stored]:
    """Wait until Alice's box holds `count` replies to `message_id` (a bound)."""
    return await wait_for(server, ALICE, replies_to(message_id), count=count, timeout=timeout)


async def replies_in_alices_box(server: MailServer, message_id: str) -> list[Stored]:
    """The replies to `message_id` in Alice's box now (no waiting)."""
    return [s for s in await read_mailbox(server, ALICE) if replies_to(message_id)(s.message)]


# --- a stand-in for the router ----------------------------------------------------------


class TestInbox:
    """Collects what the channel hands on; `reply` answers and acknowledges like the router
    does (send, then ack)."""

    __test__ = False

    def __init__(self) -> None:
        self.received: list[Inbound] = []
        self.states: list[tuple[ChannelState, str]] = []
        self._arrived = anyio.Event()
        self._taken = 0
        self.poison = memory_poison()

    async def put(self, message: Inbound) -> None:
        self.received.append(message)
        self._arrived.set()
        self._arrived = anyio.Event()

    def report(self, state: ChannelState, detail: str = "") -> None:
        self.states.append((state, detail))

    async def next(self, timeout: float = 30) -> Inbound:
        """The next inbound not yet returned (a bound, not a speed assertion)."""
        with anyio.fail_after(timeout):
            while len(self.received) <= self._taken:
                await self._arrived.wait()
        self._taken += 1
        return self.received[self._taken - 1]


def kill_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
