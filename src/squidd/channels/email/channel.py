"""The email channel: IMAP receive loop, policy gate, SMTP replies, acknowledgement.

Flow of one mail: the receive loop sees a new UID (IDLE push or poll), fetches its header
block only, and decides (loops, allowlist, authentication, rate limit). An ignored mail is
left exactly as it is and logged. Mail over the rate limit is deferred (kept in the state
file) and handed on when the sender's window allows. An accepted one is fetched whole
(unless over the size cap), parsed, recorded as pending, and handed to the router as an
`Inbound`. The router calls `send` with the reply and, once SMTP accepted it, the
inbound's `ack`, which flags the mail \\Seen (or moves it) over a second connection: the
first one sits in IDLE. Each flag is confirmed by the server's answer, after a NOOP that
lets that long-lived connection learn of mail that arrived since it last looked. When SMTP
refused the reply for good (an unknown recipient), the router calls `on_undeliverable`
instead: the mail is flagged \\Flagged, left unread, and never handed on again.

Nothing is marked read before the reply left, so a crash at any point loses no mail; the
router's handled-id record turns the resulting redelivery into an ack without a reply.
"""

from __future__ import annotations

import functools
import random
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd.channels.email.body import MailText, extract_text, human_size
from squidd.channels.email.compose import ThreadContext, build_message
from squidd.channels.email.headers import MailHeaders, parse_headers
from squidd.channels.email.imap import ImapFolder
from squidd.channels.email.policy import Gate, RateLimiter
from squidd.channels.email.smtp import SmtpSender
from squidd.channels.email.state import StateFile, state_path
from squidd.config.email import EmailSettings
from squidd.core.models import Inbound, Outbound, SessionId
from squidd.core.ports import ChannelState, Inbox
from squidd.errors import ConfigError, DeliveryRefusedError, PermanentError, TransientError

log = structlog.get_logger()

_ADDRESS_RE = re.compile(r"^[^@\s<>()\[\],;:\"\\]+@[A-Za-z0-9.-]+\.?[A-Za-z0-9-]*$")
_ACK_ATTEMPTS = 4
# A connection that stayed up this long counts as a success: the backoff starts over.
_STABLE_AFTER_S = 60.0
_DEFERRED_MIN_WAIT_S = 1.0


def make_tls_context(ca_file: Path | None) -> ssl.SSLContext:
    """Verifying TLS context: the system CAs, plus `ca_file` for a self-hosted server."""
    context = ssl.create_default_context()
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError([f"email.ca_file: cannot load {ca_file}: {exc}"]) from None
    return context


@dataclass(frozen=True, slots=True)
class _Deferred:
    """A mail held back by the rate limit (a loop guard): handed on when the window allows."""

    sender: str


def _jitter(delay: float) -> float:
    return delay * (0.5 + random.random() / 2)  # noqa: S311 - spreading retries, not security


class EmailChannel:
    """`Channel` over one IMAP folder and one SMTP account."""

    def __init__(
        self,
        settings: EmailSettings,
        data_dir: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._s = settings
        self._tls = make_tls_context(settings.ca_file)
        self._smtp = SmtpSender(settings, self._tls)
        self._state = StateFile(state_path(data_dir, settings.address.lower(), settings.folder))
        self._state_loaded = False
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
        self._clock = clock
        # UIDs handed to the router by this process and not acknowledged yet.
        self._delivered: set[int] = set()
        self._command: ImapFolder | None = None
        self._command_lock = anyio.Lock()

    @property
    def name(self) -> str:
        return "email"

    # --- receiving -----------------------------------------------------------------------

    def _warn_about_settings(self) -> None:
        s = self._s
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
        self._warn_about_settings()
        inbox.report(ChannelState.STARTING, "")
        started = False
        delay = self._s.reconnect_initial_delay_s
        try:
            while True:
                folder = ImapFolder(self._s, self._tls)
                connected_at: float | None = None
                try:
                    await folder.connect(self._s.folder)
                    connected_at = self._clock()
                    await self._reconcile(folder)
                    inbox.report(ChannelState.CONNECTED, f"{self._s.imap_host} {self._s.folder}")
                    log.info(
                        "email_connected",
                        host=self._s.imap_host,
                        folder=self._s.folder,
                        idle=self._s.idle and folder.has_capability("IDLE"),
                    )
                    if not started:
                        started = True
                        task_status.started()
                    await self._receive(folder, inbox)
                except PermanentError as exc:
                    inbox.report(ChannelState.FAILED, str(exc))
                    log.error("email_failed", error=str(exc))  # noqa: TRY400 - no traceback needed
                    raise
                except TransientError as exc:
                    if not started:
                        inbox.report(ChannelState.RECONNECTING, str(exc))
                        raise
                    if connected_at is not None and self._clock() - connected_at > _STABLE_AFTER_S:
                        delay = self._s.reconnect_initial_delay_s
                    wait = _jitter(delay)
                    inbox.report(ChannelState.RECONNECTING, str(exc))
                    log.warning("email_reconnecting", error=str(exc), delay_s=round(wait, 2))
                    await folder.close()
                    await anyio.sleep(wait)
                    delay = min(delay * 2, self._s.reconnect_max_delay_s)
                finally:
                    await folder.close()
        finally:
            await self._close_command()

    async def _reconcile(self, folder: ImapFolder) -> None:
        """Load the persisted state and reset it when the server's UIDVALIDITY changed."""
        if not self._state_loaded:
            if self._s.move_to:
                await folder.ensure_mailbox(self._s.move_to)
            await self._state.load()
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
            await self._state.save()

    async def _receive(self, folder: ImapFolder, inbox: Inbox) -> None:
        idle = self._s.idle and folder.has_capability("IDLE")
        wait = self._s.idle_renew_s if idle else self._s.poll_interval_s
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
        with structlog.contextvars.bound_contextvars(channel="email", uid=uid):
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
            await self._state.save()
            if not redelivery:
                self._limiter.record(inbound.sender)
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
        headers = parse_headers(raw_headers)
        reason = self._gate.reason_to_ignore(headers)
        if reason is None and size > self._s.max_size_bytes and self._s.oversize_action == "skip":
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
        if size > self._s.max_size_bytes:
            text = self._oversize_notice(headers, size)
            body: MailText | None = None
        else:
            raw = await folder.fetch_message(uid)
            if raw is None:
                return None
            body = await anyio.to_thread.run_sync(
                functools.partial(extract_text, raw, max_chars=self._s.max_text_chars)
            )
            text = self._prompt_text(headers, body)
        return self._inbound(folder, uid, headers, text, body, oversize=body is None)

    def _must_wait(self, uid: int, sender: str) -> bool:
        """Over the sender's rate limit, or behind an older mail of theirs that is."""
        if not self._limiter.allows(sender):
            return True
        deferred = self._state.state.deferred
        return any(other < uid and deferred[other] == sender for other in deferred)

    def _prompt_text(self, headers: MailHeaders, body: MailText) -> str:
        parts = [f"Subject: {headers.subject}" if headers.subject else "(no subject)", ""]
        parts.append(body.text or "(no text)")
        if body.attachments:
            listed = "; ".join(
                f"{a.name} ({a.content_type}, {human_size(a.size)})" for a in body.attachments
            )
            parts += ["", f"[Attachments, not opened: {listed}]"]
        return "\n".join(parts)

    def _oversize_notice(self, headers: MailHeaders, size: int) -> str:
        return (
            f"[This email is {human_size(size)}, over the {human_size(self._s.max_size_bytes)} "
            "size limit, so its content was not read. "
            f"Subject: {headers.subject or '(none)'}. "
            "Tell the sender briefly that it was too large to read.]"
        )

    def _inbound(
        self,
        folder: ImapFolder,
        uid: int,
        headers: MailHeaders,
        text: str,
        body: MailText | None,
        *,
        oversize: bool,
    ) -> Inbound:
        meta: dict[str, Any] = {
            "message_id": headers.message_id if headers.has_message_id else "",
            "references": headers.references,
            "in_reply_to": headers.in_reply_to,
            "from_name": headers.from_name,
            "uid": uid,
            "uidvalidity": folder.uidvalidity,
            "folder": self._s.folder,
            "oversize": oversize,
        }
        if body is not None:
            meta["attachments"] = tuple(
                {"name": a.name, "content_type": a.content_type, "size": a.size}
                for a in body.attachments
            )
            meta["from_html"] = body.from_html
        return Inbound(
            channel="email",
            source_id=headers.message_id,
            session_id=SessionId(headers.from_addr),
            sender=headers.from_addr,
            text=text,
            subject=headers.subject,
            meta=meta,
            ack=functools.partial(self._ack, folder.uidvalidity, uid),
            on_undeliverable=functools.partial(self._undeliverable, folder.uidvalidity, uid),
        )

    # --- acknowledging -------------------------------------------------------------------

    async def _command_folder(self) -> ImapFolder:
        if self._command is None:
            folder = ImapFolder(self._s, self._tls)
            try:
                await folder.connect(self._s.folder)
            except BaseException:
                await folder.close()
                raise
            self._command = folder
        return self._command

    async def _close_command(self) -> None:
        folder, self._command = self._command, None
        if folder is not None:
            await folder.close()

    async def _ack(self, uidvalidity: int, uid: int) -> None:
        """Flag the mail handled (\\Seen, or moved): called after the reply was accepted."""
        await self._settle(uidvalidity, uid, refused=None)

    async def _undeliverable(self, uidvalidity: int, uid: int, reason: str) -> None:
        """The reply was refused for good: flag the mail \\Flagged and leave it unread, so a
        human sees it, and never hand it on again."""
        await self._settle(uidvalidity, uid, refused=reason)

    async def _settle(self, uidvalidity: int, uid: int, *, refused: str | None) -> None:
        delay = 0.5
        state = self._state.state
        for attempt in range(1, _ACK_ATTEMPTS + 1):
            present = True
            try:
                async with self._command_lock:
                    folder = await self._command_folder()
                    if folder.uidvalidity != uidvalidity:
                        log.warning("email_ack_uidvalidity_changed", uid=uid)
                    elif refused is None:
                        present = await folder.mark_handled(uid, self._s.move_to)
                    else:
                        present = await folder.add_flag(uid, r"\Flagged")
            except TransientError as exc:
                async with self._command_lock:
                    await self._close_command()
                log.warning("email_ack_retry", uid=uid, attempt=attempt, error=str(exc))
                if attempt < _ACK_ATTEMPTS:
                    await anyio.sleep(_jitter(delay))
                    delay *= 2
                continue
            self._delivered.discard(uid)
            state.pending.discard(uid)
            await self._state.save()
            if not present:
                log.warning("email_ack_mail_gone", uid=uid)
            elif refused is None:
                log.info("email_acknowledged", uid=uid, moved_to=self._s.move_to or None)
            else:
                log.warning("email_left_flagged", uid=uid, reason=refused)
            return
        # The receive loop hands it on again later; the router then only acknowledges it.
        self._delivered.discard(uid)
        raise TransientError("could not flag the mail as handled on the IMAP server")

    # --- sending -------------------------------------------------------------------------

    async def send(self, outbound: Outbound) -> None:
        target = outbound.target.strip()
        if not _ADDRESS_RE.match(target):
            raise DeliveryRefusedError("not an email address")
        thread: ThreadContext | None = None
        inbound = outbound.in_reply_to
        if inbound is not None and inbound.channel == "email":
            meta = inbound.meta
            thread = ThreadContext(
                source_id=inbound.source_id,
                message_id=str(meta.get("message_id") or ""),
                subject=inbound.subject,
                references=tuple(str(r) for r in meta.get("references") or ()),
            )
        try:
            message = build_message(
                from_addr=self._s.address,
                from_name=self._s.from_name,
                to_addr=target,
                text=outbound.text,
                thread=thread,
                subject=outbound.subject,
            )
        except (ValueError, TypeError) as exc:
            raise DeliveryRefusedError(f"could not build the mail: {type(exc).__name__}") from exc
        await self._smtp.send(message, recipient=target)
        log.info(
            "email_sent",
            to=target,
            message_id=str(message["Message-ID"]),
            in_reply_to=thread.message_id if thread else None,
        )
