"""The email channel: the reconnect loop that keeps one IMAP folder received, and sending.

Flow of one mail: `receive.Receiver` sees it on the folder's connection, decides, and hands
it to the router as an `Inbound`. The router calls `send` with the reply (`send.send_reply`)
and, once SMTP accepted it, the inbound's `ack`, which `ack.Acknowledger` confirms over a
second connection; a reply refused for good ends in `on_undeliverable` instead (the mail
is left unread and flagged). Nothing is marked read before the reply left, so a crash at
any point loses no mail.

The loop here is `core.backoff.reconnecting` (the one both channels run): it reconnects on
transient failures with `core.backoff` delays (reset once a connection stayed up a while);
a permanent one (a rejected login) is re-raised after reporting it; the channel's state is
reported to the inbox.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd.channels.email.ack import Acknowledger
from squidd.channels.email.imap import ImapFolder
from squidd.channels.email.receive import Receiver
from squidd.channels.email.send import send_reply
from squidd.channels.email.smtp import SmtpSender
from squidd.channels.email.state import StateFile, state_path
from squidd.channels.email.tls import make_tls_context
from squidd.config.email import EmailSettings
from squidd.core.backoff import Backoff, Failures, reconnecting
from squidd.core.models import Outbound
from squidd.core.ports import ChannelState, Inbox, MediaSink
from squidd.errors import PermanentError, TransientError

__all__ = ["EmailChannel"]

log = structlog.get_logger()

# A connection that stayed up this long counts as a success: the backoff starts over.
_HEALTHY_AFTER_S = 60.0


class EmailChannel:
    """`Channel` over one IMAP folder and one SMTP account."""

    def __init__(
        self,
        settings: EmailSettings,
        data_dir: Path,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
        media: MediaSink | None = None,
        name: str = "email",
    ) -> None:
        """`monotonic` times reconnects; `clock` (wall time) the rate limit, whose counts are
        on disk and must mean the same to the next process; `name`: `email`, or
        `email-<agent>` for an agent's own mailbox."""
        self._name = name
        self._settings = settings
        self._monotonic = monotonic
        self._media = media
        self._tls = make_tls_context(settings.ca_file)
        self._smtp = SmtpSender(settings, self._tls)
        state = StateFile(state_path(data_dir, settings.address.lower(), settings.folder))
        # UIDs handed to the router by this process and not acknowledged yet.
        delivered: set[int] = set()
        self._acks = Acknowledger(settings, self._tls, state, delivered)
        self._receiver = Receiver(
            settings, state, self._acks, delivered, clock=clock, media=media, channel=name
        )
        self._backoff = Backoff(settings.reconnect_initial_delay_s, settings.reconnect_max_delay_s)

    @property
    def name(self) -> str:
        return self._name

    def _warn_about_settings(self) -> None:
        s = self._settings
        if not s.require_authentication:
            log.warning(
                "email_sender_authentication_off",
                detail="From headers are trusted as written: anyone can pose as an "
                "allowlisted sender. Only for a local setup.",
            )
        if not (s.allowed_senders or s.allowed_domains):
            log.warning("email_allowlist_empty", detail="nobody will be answered")
        for side, security in (("imap", s.imap_security), ("smtp", s.smtp_security)):
            if security == "none":
                log.warning("email_plaintext_connection", side=side)

    async def run(
        self, inbox: Inbox, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        s = self._settings
        self._warn_about_settings()
        inbox.report(ChannelState.STARTING, "")
        started = False
        failures = Failures(
            self._backoff, healthy_after_s=_HEALTHY_AFTER_S, monotonic=self._monotonic
        )

        async def attempt() -> None:
            nonlocal started
            folder = ImapFolder(s, self._tls)
            try:
                await folder.connect(s.folder)
                failures.up()
                await self._receiver.reconcile(folder)
                inbox.report(ChannelState.CONNECTED, f"{s.imap_host} {s.folder}")
                log.info(
                    "email_connected",
                    host=s.imap_host,
                    folder=s.folder,
                    idle=s.idle and folder.has_capability("IDLE"),
                )
                if not started:
                    started = True
                    task_status.started()
                await self._receiver.receive(folder, inbox)
            finally:
                await folder.close()

        def on_retry(exc: TransientError, delay: float) -> None:
            inbox.report(ChannelState.RECONNECTING, str(exc))
            if not started:
                raise exc  # the first connection failed: the supervisor says so and retries
            log.warning("email_reconnecting", reason=str(exc), retry_in_s=round(delay, 2))

        try:
            await reconnecting(attempt, failures, on_retry=on_retry)
        except PermanentError as exc:
            inbox.report(ChannelState.FAILED, str(exc))
            log.error("email_failed", reason=str(exc))  # noqa: TRY400 - no traceback needed
            raise
        finally:
            await self._acks.close()

    async def send(self, outbound: Outbound) -> None:
        await send_reply(outbound, settings=self._settings, smtp=self._smtp)
