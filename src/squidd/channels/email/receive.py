"""The receive side of one connected folder: scan, decide, defer, and hand mail on.

The receive loop sees a new UID (IDLE push or poll), fetches its header block only, and
decides (loops, allowlist, authentication, rate limit). An ignored mail is left exactly as
it is and logged. Mail over the rate limit is deferred (kept in the state file) and handed
on when the sender's window allows. An accepted one is fetched whole (unless over the size
cap), parsed, recorded as pending, and handed to the router as an `Inbound` whose `ack` and
`on_undeliverable` go to the `Acknowledger`.

Nothing is marked read here, so a crash at any point loses no mail: pending mail is handed
on again, and the router's handled-id record turns that redelivery into an ack without a
reply.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import structlog

from squidd.channels.email.ack import Acknowledger
from squidd.channels.email.attachments import keep_attachments
from squidd.channels.email.body import MailText, extract_text, listed_name
from squidd.channels.email.headers import parse_headers
from squidd.channels.email.imap import ImapFolder
from squidd.channels.email.inbound import make_inbound, oversize_notice, prompt_text
from squidd.channels.email.policy import Gate, RateLimiter
from squidd.channels.email.state import StateFile
from squidd.config.email import EmailSettings
from squidd.core.models import Attachment, Inbound
from squidd.core.ports import Inbox, MediaSink
from squidd.errors import PermanentError, TransientError

__all__ = ["Receiver"]

log = structlog.get_logger()

_DEFERRED_MIN_WAIT_S = 1.0


@dataclass(frozen=True, slots=True)
class _Deferred:
    """A mail held back by the rate limit (a loop guard): handed on when the window allows."""

    sender: str


class Receiver:
    """Decides on and hands on the mail of one folder, over the connection it is given.

    `delivered` (shared with the `Acknowledger`) holds the UIDs handed to the router by this
    process and not acknowledged yet: they are not handed on twice.
    """

    def __init__(
        self,
        settings: EmailSettings,
        state: StateFile,
        acks: Acknowledger,
        delivered: set[int],
        *,
        clock: Callable[[], float] = time.time,
        media: MediaSink | None = None,
        channel: str = "email",
    ) -> None:
        """`clock` gives wall-clock seconds: the rate limiter's times are kept on disk."""
        self._channel = channel
        self._settings = settings
        self._media = media
        self._state = state
        self._state_loaded = False
        self._acks = acks
        self._delivered = delivered
        self._gate = Gate(
            own_address=settings.address,
            allowed_senders=settings.allowed_senders,
            allowed_domains=settings.allowed_domains,
            require_authentication=settings.require_authentication,
            trusted_authserv_id=settings.trusted_authserv_id,
        )
        self._limiter = RateLimiter(
            settings.rate_limit_count, settings.rate_limit_window_s, clock=clock
        )

    async def reconcile(self, folder: ImapFolder) -> None:
        """Load the persisted state and reset it when the server's UIDVALIDITY changed; on
        the first start for this folder, put the backlog behind it (`email.backlog`)."""
        first_start = False
        if not self._state_loaded:
            if self._settings.move_to:
                await folder.ensure_mailbox(self._settings.move_to)
            await self._state.load()
            first_start = not self._state.found
            self._limiter.restore(self._state.state.rate)
            self._state_loaded = True
        state = self._state.state
        if state.uidvalidity != folder.uidvalidity:
            if state.uidvalidity is not None:
                log.warning(
                    "email_uidvalidity_changed", old=state.uidvalidity, new=folder.uidvalidity
                )
            state.uidvalidity = folder.uidvalidity
            state.last_uid = None
            state.pending = set()
            state.deferred = {}
            self._delivered.clear()
            if first_start and self._settings.backlog == "skip":
                await self._skip_backlog(folder)
            await self._state.save()

    async def _skip_backlog(self, folder: ImapFolder) -> None:
        """Mark everything already in the folder as looked at, unseen mail left as it is.

        Done before the state is first saved, so a crash cannot turn the backlog into new
        mail: without a file the next start is a first start again."""
        backlog = await folder.unseen()
        floor = (folder.uidnext - 1) if folder.uidnext else 0
        self._state.state.last_uid = max([floor, *backlog])
        log.info(
            "email_backlog_skipped",
            count=len(backlog),
            note='unseen mail from before the first start left unread; email.backlog = "answer"'
            " answers it",
        )

    async def receive(self, folder: ImapFolder, inbox: Inbox) -> None:
        """Hand on mail as it arrives, until the connection fails."""
        idle = self._settings.idle and folder.has_capability("IDLE")
        wait = self._settings.idle_renew_s if idle else self._settings.poll_interval_s
        while True:
            await self._scan_until_quiet(folder, inbox)
            await folder.wait_for_mail(self._until_deferred_due(wait))

    def _until_deferred_due(self, wait: float) -> float:
        """`wait`, or less when a sender's rate-limit window opens sooner for deferred mail
        (never less than a second: no busy loop if that mail cannot be handed on)."""
        senders = set(self._state.state.deferred.values())
        if not senders:
            return wait
        due = min(self._limiter.wait_s(sender) for sender in senders)
        return max(_DEFERRED_MIN_WAIT_S, min(wait, due))

    async def _scan_until_quiet(self, folder: ImapFolder, inbox: Inbox) -> None:
        """Scan until a round finds nothing and the server announced no mail meanwhile.

        The server tells of new mail once, with whichever command runs when it arrives (a
        fetch of another mail); IDLE does not repeat it. So a round that looked at mail,
        or during which new mail was announced, is followed by another search.
        """
        while True:
            folder.take_new_mail_notice()  # the search below sees all announced so far
            looked = await self._scan(folder, inbox)
            if not (folder.take_new_mail_notice() or looked):
                return

    async def _scan(self, folder: ImapFolder, inbox: Inbox) -> bool:
        """Hand on what is new; True when there was any mail to look at."""
        state = self._state.state
        # Mail handed on before (by an earlier process, or before a failed ack) but never
        # acknowledged: hand it on again, the router knows whether it was answered.
        again = state.pending - self._delivered
        if again:
            still_unseen = await folder.unseen_among(again)
            if again - still_unseen:
                state.pending -= again - still_unseen
                await self._state.save()
            for uid in sorted(still_unseen):
                await self._handle(folder, inbox, uid, redelivery=True)
        # Mail held back by the rate limit, oldest first, once its sender may be answered.
        ready = [u for u, sender in sorted(state.deferred.items()) if self._limiter.allows(sender)]
        if ready:
            still_unseen = await folder.unseen_among(ready)
            for uid in ready:
                if uid not in still_unseen:  # read by a human, or gone
                    state.deferred.pop(uid, None)
                    await self._state.save()
                    continue
                await self._handle(folder, inbox, uid, redelivery=False)
        first_scan = state.last_uid is None
        uids = await folder.unseen(above=state.last_uid)
        for uid in uids:
            if uid in self._delivered or uid in state.pending or uid in state.deferred:
                continue
            await self._handle(folder, inbox, uid, redelivery=False)
        if first_scan:
            floor = (folder.uidnext - 1) if folder.uidnext else 0
            state.last_uid = max([state.last_uid or 0, floor, *uids])
            await self._state.save()
        return bool(again or uids)

    async def _advance(self, uid: int) -> None:
        state = self._state.state
        if state.last_uid is None or uid > state.last_uid:
            state.last_uid = uid
            await self._state.save()

    async def _handle(
        self, folder: ImapFolder, inbox: Inbox, uid: int, *, redelivery: bool
    ) -> None:
        with structlog.contextvars.bound_contextvars(channel=self._channel, uid=uid):
            try:
                inbound = await self._examine(folder, uid, redelivery=redelivery)
            except (TransientError, PermanentError):
                raise
            except Exception:  # one bad mail must not stop the channel
                log.exception("email_message_failed")
                inbound = None
            state = self._state.state
            if isinstance(inbound, _Deferred):
                state.deferred[uid] = inbound.sender
                state.last_uid = max(state.last_uid or 0, uid)
                await self._state.save()
                return
            if inbound is None:
                if uid in state.pending or uid in state.deferred:
                    # Taken earlier, refused now (e.g. the allowlist changed): let it go.
                    state.pending.discard(uid)
                    state.deferred.pop(uid, None)
                    await self._state.save()
                await self._advance(uid)
                return
            state.deferred.pop(uid, None)
            state.pending.add(uid)
            state.last_uid = max(state.last_uid or 0, uid)
            if not redelivery:
                self._limiter.record(inbound.sender)
                state.rate = self._limiter.snapshot()
            await self._state.save()
            self._delivered.add(uid)
            log.info(
                "email_received",
                sender=inbound.sender,
                message_id=inbound.meta.get("message_id") or inbound.source_id,
                redelivery=redelivery,
                oversize=inbound.meta.get("oversize", False),
            )
            await inbox.put(inbound)

    async def _examine(
        self, folder: ImapFolder, uid: int, *, redelivery: bool
    ) -> Inbound | _Deferred | None:
        """The Inbound for this mail, `_Deferred` when the rate limit holds it back for now,
        or None when it is to be left alone."""
        head = await folder.fetch_header(uid)
        if head is None:
            return None  # expunged meanwhile
        size, raw_headers = head
        # Off the event loop: a header block may be megabytes (parsing is bounded, not free).
        headers = await anyio.to_thread.run_sync(parse_headers, raw_headers)
        reason = self._gate.reason_to_ignore(headers)
        if (
            reason is None
            and size > self._settings.max_size_bytes
            and self._settings.oversize_action == "skip"
        ):
            reason = "too_large"
        if reason is None and not redelivery and self._must_wait(uid, headers.from_addr):
            if uid not in self._state.state.deferred:
                log.info(
                    "email_deferred",
                    reason="rate_limited",
                    sender=headers.from_addr,
                    message_id=headers.message_id,
                    retry_in_s=round(self._limiter.wait_s(headers.from_addr), 1),
                )
            return _Deferred(headers.from_addr)
        if reason is not None:
            log.info(
                "email_ignored",
                reason=reason,
                sender=headers.from_addr or None,
                message_id=headers.message_id,
                size=size,
            )
            return None
        if size > self._settings.max_size_bytes:
            text = oversize_notice(headers, size, self._settings.max_size_bytes)
            body: MailText | None = None
            attachments: tuple[Attachment, ...] = ()
        else:
            raw = await folder.fetch_message(uid)
            if raw is None:
                return None
            body = await anyio.to_thread.run_sync(
                functools.partial(extract_text, raw, max_chars=self._settings.max_text_chars)
            )
            attachments, opened = await self._keep_attachments(raw, headers.from_addr)
            text = prompt_text(headers, body, opened=opened)
        return make_inbound(
            headers,
            text,
            body,
            ack=functools.partial(self._acks.ack, folder.uidvalidity, uid),
            on_undeliverable=functools.partial(self._acks.undeliverable, folder.uidvalidity, uid),
            attachments=attachments,
            channel=self._channel,
        )

    async def _keep_attachments(
        self, raw: bytes, session_id: str
    ) -> tuple[tuple[Attachment, ...], list[tuple[str, str]]]:
        """The allowed attachments stored (references) and, as listed, (name, type) of each."""
        if self._media is None:
            return (), []
        kept, found = await keep_attachments(raw, self._settings, self._media, session_id)
        return kept, [(listed_name(name), ctype) for name, ctype, _ in found]

    def _must_wait(self, uid: int, sender: str) -> bool:
        """Over the sender's rate limit, or behind an older mail of theirs that is."""
        if not self._limiter.allows(sender):
            return True
        deferred = self._state.state.deferred
        return any(other < uid and deferred[other] == sender for other in deferred)
