"""One IMAP connection with a selected folder, on top of aioimaplib.

Adds what the library lacks or leaves loose: STARTTLS (upgrade of the live transport, with
certificate verification, refusing servers that do not offer it), UID-based search, fetch
and flagging with `BODY.PEEK` (fetching never marks a mail read), IDLE with a renewal
before the server's 30-minute limit, and prompt notice of a dropped connection.

Every library or socket error leaves this module as `TransientError`; a rejected login or
a certificate that does not verify as `PermanentError` (a human must act).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

import aioimaplib
import anyio
import structlog

from squidd.channels.email.errors import IMAP_CAUGHT, imap_error
from squidd.config.email import EmailSettings
from squidd.errors import PermanentError, TransientError
from squidd.secrets import secret_value

log = structlog.get_logger()

T = TypeVar("T")

_LOST = [b"squidd-connection-lost"]
_UIDVALIDITY_RE = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_UIDNEXT_RE = re.compile(rb"\[UIDNEXT (\d+)\]")
_FETCH_UID_RE = re.compile(rb"\bUID (\d+)")
_EXISTS_RE = re.compile(rb"^\* \d+ EXISTS")
_FETCH_FLAGS_RE = re.compile(rb"\bFLAGS \(([^)]*)\)")
_FETCH_SIZE_RE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_LITERAL_RE = re.compile(rb"\{(\d+)\}\s*$")


def quote_mailbox(name: str) -> str:
    """A mailbox name as an IMAP quoted string."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _uid_set(uids: Iterable[int]) -> str:
    return ",".join(str(u) for u in sorted(set(uids)))


def _fetch_parts(lines: list[Any]) -> list[tuple[bytes, bytes | None]]:
    """(response text, literal) pairs of a FETCH response, one per message."""
    out: list[tuple[bytes, bytes | None]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if isinstance(line, bytes) and b"FETCH" in line:
            text = line
            literal: bytes | None = None
            if _LITERAL_RE.search(line) and index + 1 < len(lines):
                literal = bytes(lines[index + 1])
                index += 1
                # items after the literal (e.g. " UID 5)") come on the next line
                if index + 1 < len(lines) and isinstance(lines[index + 1], bytes):
                    follow = lines[index + 1]
                    if b"FETCH" not in follow:
                        text += b" " + follow
            out.append((text, literal))
        index += 1
    return out


def _flags_of(lines: list[Any], uid: int) -> set[str] | None:
    """The lower-cased FLAGS a FETCH response reports for `uid`; None when it has none."""
    for line in lines:
        if not isinstance(line, bytes | bytearray) or b"FETCH" not in line:
            continue
        uid_match = _FETCH_UID_RE.search(line)
        flags_match = _FETCH_FLAGS_RE.search(line)
        if uid_match and flags_match and int(uid_match.group(1)) == uid:
            return {f.lower() for f in flags_match.group(1).decode("ascii", "replace").split()}
    return None


class ImapFolder:
    """A logged-in connection with `folder` selected. Use `connect`, then `close`."""

    def __init__(self, settings: EmailSettings, tls_context: ssl.SSLContext) -> None:
        self._settings = settings
        self._tls = tls_context
        self._client: aioimaplib.IMAP4 | None = None
        self._lost = False
        self._gone = anyio.Event()
        self.uidvalidity = 0
        self.uidnext: int | None = None
        self._new_mail_announced = False

    # --- plumbing ------------------------------------------------------------------------

    @property
    def client(self) -> aioimaplib.IMAP4:
        if self._client is None or self._lost:
            raise TransientError("IMAP connection lost")
        return self._client

    def _on_connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._gone.set()
        client = self._client
        if client is not None:
            # Wake an IDLE wait at once instead of waiting for its timeout.
            client.protocol.idle_queue.put_nowait(_LOST)

    async def _call(self, what: str, awaitable: Awaitable[T]) -> T:
        """Run one library call, translating its failures."""
        try:
            with anyio.fail_after(self._settings.timeout_s + 5):
                return await awaitable
        except IMAP_CAUGHT as exc:
            error = imap_error(exc, what)
            if error is None:
                raise  # not the server's doing: a defect
            if isinstance(error, TransientError):
                self._lost = True
            raise error from exc

    async def _ok(self, what: str, awaitable: Awaitable[Any]) -> Any:
        response = await self._call(what, awaitable)
        if response.result != "OK":
            raise TransientError(f"IMAP {what} answered {response.result}")
        return response

    # --- session -------------------------------------------------------------------------

    async def connect(self, folder: str) -> None:
        s = self._settings
        implicit = s.imap_security == "tls"
        self._client = aioimaplib.IMAP4(
            host=s.imap_host,
            port=s.imap_port,
            timeout=s.timeout_s,
            conn_lost_cb=self._on_connection_lost,
            ssl_context=self._tls if implicit else None,
        )
        self._watch_exists(self._client.protocol)
        await self._call("connect", self._client.wait_hello_from_server())
        if s.imap_security == "starttls":
            await self._starttls()
        response = await self._call(
            "login", self.client.login(s.username, secret_value(s.password) or "")
        )
        if response.result != "OK":
            raise PermanentError("the IMAP server rejected the login")
        response = await self._ok("select", self.client.select(quote_mailbox(folder)))
        text = b" ".join(x for x in response.lines if isinstance(x, bytes))
        match = _UIDVALIDITY_RE.search(text)
        if not match:
            raise TransientError("IMAP SELECT returned no UIDVALIDITY")
        self.uidvalidity = int(match.group(1))
        next_match = _UIDNEXT_RE.search(text)
        self.uidnext = int(next_match.group(1)) if next_match else None

    def _watch_exists(self, protocol: Any) -> None:
        """Note every untagged EXISTS, whatever command it came with.

        The server announces new mail once, with the answer to whatever command runs then
        (a FETCH of another mail), and aioimaplib drops untagged data it cannot file under
        the running command. Without this note, mail that arrived during a fetch round
        waited for the next mail or the next IDLE renewal. The hook wraps one method of
        the pinned library's protocol object.
        """
        untagged = protocol._untagged_response  # private: see the docstring

        def spy(line: bytes) -> Any:
            if _EXISTS_RE.match(line):
                self._new_mail_announced = True
            return untagged(line)

        protocol._untagged_response = spy

    def take_new_mail_notice(self) -> bool:
        """Whether the server announced new mail (EXISTS) since the last call."""
        announced, self._new_mail_announced = self._new_mail_announced, False
        return announced

    async def _starttls(self) -> None:
        client = self.client
        if not client.has_capability("STARTTLS"):
            # Never fall back to plain text: that is what a downgrade attack looks like.
            raise PermanentError("the IMAP server does not offer STARTTLS")
        protocol = client.protocol
        command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
        response = await self._call("starttls", protocol.execute(command))
        if response.result != "OK":
            raise TransientError("IMAP STARTTLS refused")
        loop = asyncio.get_running_loop()
        transport = await self._call(
            "starttls handshake",
            loop.start_tls(
                protocol.transport, protocol, self._tls, server_hostname=self._settings.imap_host
            ),
        )
        protocol.transport = transport
        # Capabilities read before TLS cannot be trusted (RFC 3501 6.2.1).
        await self._call("capability", protocol.capability())

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):
            try:
                if not self._lost:
                    await client.logout()
            except IMAP_CAUGHT as exc:  # leaving anyway: a failed goodbye changes nothing
                log.debug("email_imap_logout_failed", error=type(exc).__name__)
        transport = client.protocol.transport
        if transport is not None and not self._gone.is_set():
            transport.close()
            # The socket is released on a later loop iteration: wait for it, so no
            # half-closed transport outlives us (and the event loop).
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await self._gone.wait()

    async def ensure_mailbox(self, name: str) -> None:
        """Create mailbox `name` unless it exists; PermanentError if that is refused."""
        client = self.client
        status = await self._call("status", client.status(quote_mailbox(name), "(MESSAGES)"))
        if status.result == "OK":
            return
        created = await self._call("create", client.create(quote_mailbox(name)))
        if created.result != "OK":
            raise PermanentError(f"the IMAP folder {name!r} does not exist and cannot be created")
        log.info("email_folder_created", folder=name)

    def has_capability(self, name: str) -> bool:
        return self._client is not None and self._client.has_capability(name)

    # --- mailbox operations --------------------------------------------------------------

    async def search(self, *criteria: str) -> list[int]:
        response = await self._ok("search", self.client.uid_search(*criteria, charset=None))
        uids: list[int] = []
        for line in response.lines:
            if isinstance(line, bytes):
                text = line.removeprefix(b"SEARCH").strip()
                if text and all(tok.isdigit() for tok in text.split()):
                    uids.extend(int(tok) for tok in text.split())
        return sorted(set(uids))

    async def unseen(self, *, above: int | None = None) -> list[int]:
        """UIDs of unseen mail, all of them or those above `above`."""
        if above is None:
            return await self.search("UNSEEN")
        # `n:*` always matches the highest UID, even below n: filter client-side.
        return [u for u in await self.search("UNSEEN", "UID", f"{above + 1}:*") if u > above]

    async def unseen_among(self, uids: Iterable[int]) -> set[int]:
        wanted = set(uids)
        if not wanted:
            return set()
        found = await self.search("UNSEEN", "UID", _uid_set(wanted))
        return wanted & set(found)

    async def fetch_header(self, uid: int) -> tuple[int, bytes] | None:
        """(size in bytes, raw header block) of one mail; None if it is gone."""
        response = await self._ok(
            "fetch", self.client.uid("fetch", str(uid), "(UID RFC822.SIZE BODY.PEEK[HEADER])")
        )
        for text, literal in _fetch_parts(response.lines):
            uid_match = _FETCH_UID_RE.search(text)
            size_match = _FETCH_SIZE_RE.search(text)
            if uid_match and int(uid_match.group(1)) == uid and literal is not None:
                return (int(size_match.group(1)) if size_match else len(literal), literal)
        return None

    async def fetch_message(self, uid: int) -> bytes | None:
        """The whole raw mail (without marking it read); None if it is gone."""
        response = await self._ok("fetch", self.client.uid("fetch", str(uid), "(UID BODY.PEEK[])"))
        for text, literal in _fetch_parts(response.lines):
            uid_match = _FETCH_UID_RE.search(text)
            if uid_match and int(uid_match.group(1)) == uid and literal is not None:
                return literal
        return None

    async def add_flag(self, uid: int, flag: str) -> bool:
        """Set `flag` on the mail and confirm it from the server; False when the mail is gone.

        A connection only acts on the messages it has been told about: Dovecot answers a UID
        STORE for a mail that arrived after this connection last synced with OK and changes
        nothing. So NOOP first (the connection learns of new mail), then a STORE whose
        untagged FETCH shows the flag set, or else a FETCH FLAGS that does.
        """
        client = self.client
        await self._ok("noop", client.noop())
        stored = await self._ok("store", client.uid("store", str(uid), "+FLAGS", f"({flag})"))
        flags = _flags_of(stored.lines, uid)
        if flags is not None and flag.lower() in flags:
            return True
        fetched = await self._ok("fetch", client.uid("fetch", str(uid), "(UID FLAGS)"))
        flags = _flags_of(fetched.lines, uid)
        if flags is None:
            return False
        if flag.lower() not in flags:
            raise TransientError(f"IMAP STORE did not set {flag}")
        return True

    async def mark_handled(self, uid: int, move_to: str) -> bool:
        """Flag \\Seen (confirmed); with `move_to`, also move it there (MOVE, else COPY +
        delete). False when the mail is no longer in the folder."""
        if not await self.add_flag(uid, r"\Seen"):
            return False
        if not move_to:
            return True
        target = quote_mailbox(move_to)
        if self.has_capability("MOVE"):
            await self._ok("move", self.client.uid("move", str(uid), target))
            return True
        await self._ok("copy", self.client.uid("copy", str(uid), target))
        await self._ok("store", self.client.uid("store", str(uid), "+FLAGS.SILENT", r"(\Deleted)"))
        if self.has_capability("UIDPLUS"):
            await self._ok("expunge", self.client.uid("expunge", str(uid)))
        return True

    async def wait_for_mail(self, max_wait: float) -> None:
        """Return when new mail may have arrived, or after `max_wait` seconds.

        With IDLE the server pushes; the IDLE is ended after `max_wait` (set below the
        server's 29-minute limit) so the caller re-issues it. Without IDLE this just sleeps:
        the caller's next search is the poll.
        """
        if not (self._settings.idle and self.has_capability("IDLE")):
            await anyio.sleep(max_wait)
            return
        client = self.client
        idle = await self._call("idle", client.idle_start(timeout=max_wait))
        try:
            with anyio.move_on_after(max_wait + 10):
                while True:
                    push = await client.wait_server_push(timeout=max_wait + 10)
                    if push == _LOST or self._lost:
                        raise TransientError("IMAP connection lost during IDLE")
                    if push == aioimaplib.STOP_WAIT_SERVER_PUSH:
                        log.debug("email_idle_renew")
                        return
                    if any(b"EXISTS" in line for line in push if isinstance(line, bytes)):
                        return
        except TimeoutError as exc:
            raise TransientError("IMAP IDLE gave no sign of life") from exc
        finally:
            if not self._lost and client.has_pending_idle():
                client.idle_done()
                with anyio.CancelScope(shield=True), anyio.move_on_after(self._settings.timeout_s):
                    try:
                        await idle
                    except IMAP_CAUGHT as exc:
                        self._lost = True
                        log.debug("email_idle_end_failed", error=type(exc).__name__)
