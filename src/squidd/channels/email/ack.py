"""Confirmed acknowledgement: a mail is flagged handled only once its reply left.

The router calls the inbound's `ack` after SMTP accepted the reply: the mail is flagged
\\Seen (or moved to `email.move_to`). When SMTP refused the reply for good (an unknown
recipient) it calls `on_undeliverable` instead: the mail is flagged \\Flagged and left
unread, so a human sees it, and is never handed on again. Either way the flag goes over a
second IMAP connection (the receive loop's sits in IDLE), and each flag is confirmed by
the server's answer, after a NOOP that lets that long-lived connection learn of mail that
arrived since it last looked.

A flag that cannot be set after a few attempts raises `TransientError` and leaves the mail
pending: the receive loop hands it on again later and the router, which knows it was
answered, then only acknowledges it.
"""

from __future__ import annotations

import ssl

import anyio
import structlog

from squidd.channels.email.imap import ImapFolder
from squidd.channels.email.state import StateFile
from squidd.config.email import EmailSettings
from squidd.core.backoff import Backoff
from squidd.errors import TransientError

__all__ = ["ACK_ATTEMPTS", "ACK_RETRY", "Acknowledger"]

log = structlog.get_logger()

ACK_ATTEMPTS = 4
ACK_RETRY = Backoff(initial_s=0.5, maximum_s=2.0)
"""Waits between the attempts: about 0.5, 1 and 2 seconds."""


class Acknowledger:
    """Flags mail over its own IMAP connection, opened on first use and kept.

    `delivered` is the receive loop's set of UIDs handed to the router by this process and
    not settled yet: a settled (or given up) UID leaves it, so the loop may hand it on again.
    """

    def __init__(
        self,
        settings: EmailSettings,
        tls: ssl.SSLContext,
        state: StateFile,
        delivered: set[int],
        *,
        retry: Backoff = ACK_RETRY,
    ) -> None:
        self._settings = settings
        self._tls = tls
        self._state = state
        self._delivered = delivered
        self._retry = retry
        self._command: ImapFolder | None = None
        self._command_lock = anyio.Lock()

    async def ack(self, uidvalidity: int, uid: int) -> None:
        """Flag the mail handled (\\Seen, or moved): called after the reply was accepted."""
        await self._settle(uidvalidity, uid, refused=None)

    async def undeliverable(self, uidvalidity: int, uid: int, reason: str) -> None:
        """The reply was refused for good: flag the mail \\Flagged and leave it unread, so a
        human sees it, and never hand it on again."""
        await self._settle(uidvalidity, uid, refused=reason)

    async def close(self) -> None:
        """Close the connection, if open; the next flag opens a new one."""
        folder, self._command = self._command, None
        if folder is not None:
            await folder.close()

    async def _command_folder(self) -> ImapFolder:
        if self._command is None:
            folder = ImapFolder(self._settings, self._tls)
            try:
                await folder.connect(self._settings.folder)
            except BaseException:
                await folder.close()
                raise
            self._command = folder
        return self._command

    async def _settle(self, uidvalidity: int, uid: int, *, refused: str | None) -> None:
        state = self._state.state
        move_to = self._settings.move_to
        for attempt in range(1, ACK_ATTEMPTS + 1):
            present = True
            try:
                async with self._command_lock:
                    folder = await self._command_folder()
                    if folder.uidvalidity != uidvalidity:
                        log.warning("email_ack_uidvalidity_changed", uid=uid)
                    elif refused is None:
                        present = await folder.mark_handled(uid, move_to)
                    else:
                        present = await folder.add_flag(uid, r"\Flagged")
            except TransientError as exc:
                async with self._command_lock:
                    await self.close()
                log.warning("email_ack_retry", uid=uid, attempt=attempt, reason=str(exc))
                if attempt < ACK_ATTEMPTS:
                    await anyio.sleep(self._retry.delay(attempt))
                continue
            self._delivered.discard(uid)
            state.pending.discard(uid)
            await self._state.save()
            if not present:
                log.warning("email_ack_mail_gone", uid=uid)
            elif refused is None:
                log.info("email_acknowledged", uid=uid, moved_to=move_to or None)
            else:
                log.warning("email_left_flagged", uid=uid, reason=refused)
            return
        # The receive loop hands it on again later; the router then only acknowledges it.
        self._delivered.discard(uid)
        raise TransientError("could not flag the mail as handled on the IMAP server")
