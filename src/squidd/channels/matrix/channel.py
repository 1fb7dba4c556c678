"""The Matrix channel: a sync loop that turns room messages into `Inbound`s, and `send`.

Receiving, per sync response (a "batch"):
1. nio updates its room state and decrypts what it can; we then do the key chores
   (upload/query/claim) and apply the device trust policy;
2. invites from allowed users are accepted, others declined;
3. each joined room's timeline is walked in order; a `limited` timeline is first completed
   with `/messages` back to the previous position, so nothing in a gap is skipped;
4. messages the policy answers are handed to the inbox with an `ack` hook; the persisted
   sync position moves past the batch only when all of them were acked (`SyncLedger`).

On the very first start (no persisted position) the initial sync only records where the
room histories end: nothing older is answered. After a restart the loop resumes from the
persisted position, so messages sent while the daemon was down are answered once (the
router's handled-id record prevents a second answer for anything re-delivered).

Sending renders markdown to sanitised HTML, relates the reply to the message it answers
(inside the thread when the message came in one), splits long replies, and keeps a typing
notice up while the agent works.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus
from nio import (
    AsyncClient,
    BadEvent,
    ErrorResponse,
    InviteMemberEvent,
    JoinResponse,
    MegolmEvent,
    MessageDirection,
    OlmUnverifiedDeviceError,
    RoomMemberEvent,
    RoomMessage,
    RoomMessageEmote,
    RoomMessageNotice,
    RoomMessagesResponse,
    RoomMessageText,
    RoomSendResponse,
    SyncResponse,
    UnknownBadEvent,
    UnknownEvent,
)

from squidd.channels.matrix import e2ee
from squidd.channels.matrix.client import (
    NETWORK_ERRORS,
    TokenRejectedError,
    call,
    describe,
    open_client,
    send_refusal,
    translate,
)
from squidd.channels.matrix.policy import Policy
from squidd.channels.matrix.render import (
    MAX_CONTENT_BYTES,
    content_size,
    message_content,
    split_markdown,
    strip_reply_fallback,
)
from squidd.channels.matrix.state import Batch, MatrixFiles, SyncLedger
from squidd.config.matrix import MatrixSettings
from squidd.core.backoff import Backoff, Failures
from squidd.core.models import Destination, Inbound, Outbound, SessionId
from squidd.core.ports import ChannelState, Inbox
from squidd.errors import DeliveryError, PermanentError, SquiddError, TransientError

log = structlog.get_logger()

CHANNEL = "matrix"
SEEN_MAX = 20_000  # event ids remembered for de-duplication within one run
BACKFILL_PAGE = 100
BACKFILL_MAX_PAGES = 50
TYPING_TIMEOUT_MS = 30_000
TYPING_REFRESH_S = 20.0
TYPING_MAX_S = 15 * 60  # a turn that never ends must not type forever
TRUNCATED_NOTE = "\n[... truncated: the message is longer than what is shown here]"
# An event id as the spec types it: `$` and printable ASCII (the opaque ids of old room
# versions, url-safe base64 hashes of newer ones), at most 255 bytes.
_EVENT_ID_RE = re.compile(r"\$[\x21-\x7e]{1,254}")


@dataclass(slots=True)
class _Undecrypted:
    room_id: str
    event: MegolmEvent
    batch: Batch
    first_seen: float


class MatrixChannel:
    """The `Channel` for Matrix. Create with `create_channel(settings)`."""

    def __init__(
        self,
        settings: MatrixSettings,
        data_dir: Path,
        *,
        monotonic: Any = time.monotonic,
    ) -> None:
        self._cfg = settings
        self._files = MatrixFiles(data_dir)
        self._monotonic = monotonic
        self._client: AsyncClient | None = None
        self._policy: Policy | None = None
        self._names: set[str] = set()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._undecrypted: dict[str, _Undecrypted] = {}
        self._invites_seen: set[str] = set()
        # room id -> {event id being answered -> when the typing lease began}
        self._typing: dict[str, dict[str, float]] = {}
        self._typing_wakeup = anyio.Event()
        self._backoff = Backoff(settings.reconnect_initial_delay_s, settings.reconnect_max_delay_s)
        self._filter: dict[str, Any] = {
            "room": {
                "timeline": {"limit": settings.timeline_limit},
                "state": {"lazy_load_members": False},
                "ephemeral": {"not_types": ["*"]},
            },
            "presence": {"not_types": ["*"]},
        }

    @property
    def name(self) -> str:
        return CHANNEL

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            raise RuntimeError("the Matrix policy is built when the channel connects")
        return self._policy

    # --- receive loop ----------------------------------------------------------------------

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        inbox.report(ChannelState.STARTING, "logging in")
        await self._files.prepare()
        try:
            client = await open_client(self._cfg, self._files)
        except TokenRejectedError as exc:
            inbox.report(ChannelState.FAILED, str(exc))
            raise
        try:
            await self._run_client(client, inbox, task_status)
        finally:
            self._client = None
            with anyio.CancelScope(shield=True):
                await client.close()

    async def _run_client(
        self, client: AsyncClient, inbox: Inbox, task_status: TaskStatus[None]
    ) -> None:
        user_id: str = client.user_id
        self._policy = await self._build_policy(client)
        ledger = SyncLedger(functools.partial(self._files.save_sync_token, user_id))
        since = await self._files.load_sync_token(user_id)
        first_start = since is None
        # Full state on every start: nio keeps no room state across restarts, and the
        # members and encryption status of every room are needed to answer correctly.
        response = await self._sync(client, since=since, full_state=True, wait=False)
        self._client = client
        await self._load_names(client)
        if first_start:
            batch = ledger.open(response.next_batch)
            await self._chores(client)
            await self._handle_invites(client, response)
            for info in response.rooms.join.values():
                for event in info.timeline.events:
                    self._remember(_event_id(event))
            await ledger.seal(batch)
            log.info("matrix_first_start", history="not answered", rooms=len(response.rooms.join))
        else:
            await self._handle_batch(client, inbox, ledger, response, since)
        since = response.next_batch
        log.info(
            "matrix_connected",
            user=user_id,
            device=client.device_id,
            e2ee=client.olm is not None,
            fingerprint=e2ee.own_fingerprint(client),
            rooms=len(client.rooms),
        )
        inbox.report(ChannelState.CONNECTED, f"{user_id} on {self._cfg.homeserver}")
        task_status.started()
        # The sync loop's error is re-raised outside the task group, so the supervisor sees
        # a PermanentError / TransientError rather than an exception group.
        failure: SquiddError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._typing_loop, client)
            try:
                await self._sync_loop(client, inbox, ledger, since)
            except SquiddError as exc:
                failure = exc
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _sync_loop(
        self, client: AsyncClient, inbox: Inbox, ledger: SyncLedger, since: str
    ) -> None:
        failures = Failures(self._backoff)
        while True:
            try:
                response = await self._sync(client, since=since, wait=True)
                since = await self._handle_batch(client, inbox, ledger, response, since)
            except TokenRejectedError as exc:
                await self._token_rejected(inbox, exc)
            except TransientError as exc:
                delay = failures.next_delay()
                log.warning(
                    "matrix_sync_failed",
                    attempt=failures.count,
                    retry_in_s=round(delay, 2),
                    reason=str(exc),
                )
                inbox.report(
                    ChannelState.RECONNECTING, f"{exc}; retry {failures.count} in {delay:.1f}s"
                )
                await anyio.sleep(delay)
                continue
            if failures.count:
                log.info("matrix_reconnected", after_attempts=failures.count)
                inbox.report(ChannelState.CONNECTED, f"{client.user_id} on {self._cfg.homeserver}")
            failures.up()

    async def _token_rejected(self, inbox: Inbox, exc: TokenRejectedError) -> None:
        if self._cfg.access_token is None and self._cfg.password is not None:
            # A kept password login went stale: forget it; the restart logs in again.
            await self._files.forget_credentials()
            raise TransientError(f"{exc}; logging in again with the password") from exc
        inbox.report(ChannelState.FAILED, str(exc))
        log.error("matrix_token_rejected", reason=str(exc))
        raise exc

    async def _sync(
        self, client: AsyncClient, *, since: str | None, wait: bool, full_state: bool = False
    ) -> SyncResponse:
        timeout_ms = int(self._cfg.sync_timeout_s * 1000) if wait else 0
        response = await call(
            "sync",
            client.sync(
                timeout=timeout_ms,
                sync_filter=self._filter,
                since=since,
                full_state=full_state or None,
            ),
        )
        if isinstance(response, ErrorResponse):
            raise translate("sync", response)
        if not isinstance(response, SyncResponse):
            raise TransientError(f"sync: unexpected answer {type(response).__name__}")
        return response

    async def _build_policy(self, client: AsyncClient) -> Policy:
        cfg = self._cfg
        return Policy.build(
            client.user_id,
            allowed_users=cfg.allowed_users,
            allowed_servers=cfg.allowed_servers,
            allowed_rooms=await self._resolve_rooms(client, cfg.allowed_rooms),
            open_rooms=await self._resolve_rooms(client, cfg.open_rooms),
        )

    async def _resolve_rooms(self, client: AsyncClient, rooms: Sequence[str]) -> list[str]:
        resolved: list[str] = []
        for room in rooms:
            if not room.startswith("#"):
                resolved.append(room)
                continue
            response = await call("resolving a room alias", client.room_resolve_alias(room))
            if isinstance(response, ErrorResponse):
                log.warning("matrix_room_alias_unresolved", alias=room, reason=response.message)
                continue
            resolved.append(response.room_id)
        return resolved

    async def _load_names(self, client: AsyncClient) -> None:
        localpart = client.user_id.split(":", 1)[0].lstrip("@")
        self._names = {localpart}
        response = await call("reading the profile", client.get_displayname(client.user_id))
        if not isinstance(response, ErrorResponse) and response.displayname:
            self._names.add(response.displayname)

    async def _chores(self, client: AsyncClient) -> None:
        await call("key maintenance", e2ee.maintain_keys(client))
        e2ee.apply_trust(client, self._cfg.device_trust, self.policy.user_allowed)

    # --- one batch ---------------------------------------------------------------------------

    async def _handle_batch(
        self,
        client: AsyncClient,
        inbox: Inbox,
        ledger: SyncLedger,
        response: SyncResponse,
        since: str | None,
    ) -> str:
        """Hand out a sync response; return the position to sync from next."""
        batch = ledger.open(response.next_batch)
        try:
            await self._chores(client)
            await self._handle_invites(client, response)
            for room_id, info in response.rooms.join.items():
                events = list(info.timeline.events)
                joined_at = _own_join_index(events, client.user_id)
                if joined_at is not None:
                    # A room we just joined: what came before our join is history.
                    events = events[joined_at + 1 :]
                elif info.timeline.limited and since and info.timeline.prev_batch:
                    events = (
                        await self._backfill(client, room_id, info.timeline.prev_batch, since)
                        + events
                    )
                for event in events:
                    await self._handle_event(client, inbox, ledger, batch, room_id, event)
            await self._retry_undecrypted(client, inbox, ledger)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await ledger.abandon(batch)
            raise
        await ledger.seal(batch)
        next_batch: str = response.next_batch
        return next_batch

    async def _backfill(
        self, client: AsyncClient, room_id: str, prev_batch: str, since: str
    ) -> list[Any]:
        """The events between the previous position and the start of a limited timeline."""
        collected: list[Any] = []
        start = prev_batch
        for _ in range(BACKFILL_MAX_PAGES):
            response = await call(
                "back-filling a room",
                client.room_messages(
                    room_id,
                    start=start,
                    end=since,
                    direction=MessageDirection.back,
                    limit=BACKFILL_PAGE,
                ),
            )
            if isinstance(response, ErrorResponse):
                raise translate("back-filling a room", response)
            if not isinstance(response, RoomMessagesResponse):
                raise TransientError(f"back-fill: unexpected answer {type(response).__name__}")
            collected.extend(response.chunk)
            if not response.chunk or not response.end or response.end == start:
                break
            start = response.end
        else:
            log.warning("matrix_backfill_truncated", room=room_id, events=len(collected))
        collected.reverse()
        log.info("matrix_backfilled", room=room_id, events=len(collected))
        return collected

    async def _handle_invites(self, client: AsyncClient, response: SyncResponse) -> None:
        # A room we joined or left may invite us again later: that invite is new.
        self._invites_seen -= set(response.rooms.join) | set(response.rooms.leave)
        for room_id, info in response.rooms.invite.items():
            if room_id in self._invites_seen:
                continue
            inviter = ""
            for event in info.invite_state:
                if (
                    isinstance(event, InviteMemberEvent)
                    and event.state_key == client.user_id
                    and event.membership == "invite"
                ):
                    inviter = event.sender
            self._invites_seen.add(room_id)
            if inviter and self.policy.invite_accepted(inviter):
                joined = await call("joining a room", client.join(room_id))
                if isinstance(joined, JoinResponse):
                    log.info("matrix_invite_accepted", room=room_id, inviter=inviter)
                else:
                    self._invites_seen.discard(room_id)  # try again on the next sync
                    log.warning(
                        "matrix_join_failed", room=room_id, reason=getattr(joined, "message", "")
                    )
            else:
                log.info("matrix_invite_declined", room=room_id, inviter=inviter or "unknown")
                left = await call("declining an invite", client.room_leave(room_id))
                if isinstance(left, ErrorResponse):
                    log.warning("matrix_decline_failed", room=room_id, reason=left.message)

    async def _handle_event(
        self,
        client: AsyncClient,
        inbox: Inbox,
        ledger: SyncLedger,
        batch: Batch,
        room_id: str,
        event: Any,
    ) -> None:
        event_id = _event_id(event)
        if not event_id:
            log.info("matrix_event_malformed", room=room_id, error=_bad_reason(event))
            return
        if not self._remember(event_id):
            log.debug("matrix_event_duplicate", room=room_id, event_id=event_id)
            return
        with structlog.contextvars.bound_contextvars(room=room_id, event_id=event_id):
            try:
                await self._dispatch(client, inbox, ledger, batch, room_id, event)
            except SquiddError:
                raise
            except Exception:  # the per-event boundary: one odd event must not stop the loop
                log.exception("matrix_event_failed")

    async def _dispatch(
        self,
        client: AsyncClient,
        inbox: Inbox,
        ledger: SyncLedger,
        batch: Batch,
        room_id: str,
        event: Any,
    ) -> None:
        if isinstance(event, MegolmEvent):
            await self._undecryptable(client, ledger, batch, room_id, event)
        elif _is_text_message(event):
            await self._message(client, inbox, ledger, batch, room_id, event)
        elif isinstance(event, BadEvent | UnknownBadEvent):
            log.info("matrix_event_malformed", type=_event_type(event), error=_bad_reason(event))
        elif isinstance(event, UnknownEvent | RoomMessage):
            log.debug("matrix_event_ignored", type=_event_type(event), reason="not a text message")
        elif not isinstance(event, RoomMemberEvent):
            log.debug("matrix_event_ignored", type=_event_type(event), reason="not a message")

    async def _undecryptable(
        self, client: AsyncClient, ledger: SyncLedger, batch: Batch, room_id: str, event: Any
    ) -> None:
        sender: str = event.sender
        if sender == client.user_id or not self.policy.user_allowed(sender):
            log.debug("matrix_message_ignored", sender=sender, reason="undecryptable, not allowed")
            return
        malformed = e2ee.malformed_megolm(event)
        if malformed is not None:
            # No key will ever open it: not held back, no key requests for made-up sessions.
            log.warning("matrix_undecryptable_malformed", sender=sender, reason=malformed)
            return
        reason = e2ee.undecryptable_reason(client, event)
        log.warning(
            "matrix_undecryptable",
            sender=sender,
            session_id=getattr(event, "session_id", ""),
            reason=reason,
            wait_s=self._cfg.decrypt_wait_s,
        )
        ledger.add(batch, event.event_id)
        self._undecrypted[event.event_id] = _Undecrypted(room_id, event, batch, self._monotonic())
        if client.olm is not None:
            try:
                await call("requesting a room key", client.request_room_key(event))
            except TransientError:
                raise
            except Exception as exc:  # noqa: BLE001 - nio refuses duplicate requests this way
                log.debug("matrix_room_key_request_skipped", reason=describe(exc))

    async def _retry_undecrypted(
        self, client: AsyncClient, inbox: Inbox, ledger: SyncLedger
    ) -> None:
        now = self._monotonic()
        for event_id, item in list(self._undecrypted.items()):
            decrypted = e2ee.try_decrypt(client, item.event)
            if decrypted is not None:
                del self._undecrypted[event_id]
                log.info("matrix_decrypted_late", room=item.room_id, event_id=event_id)
                delivered = False
                if _is_text_message(decrypted):
                    delivered = await self._message(
                        client, inbox, ledger, item.batch, item.room_id, decrypted
                    )
                if not delivered:  # else the router's ack of the message settles it
                    await ledger.ack(item.batch, event_id)
            elif now - item.first_seen >= self._cfg.decrypt_wait_s:
                del self._undecrypted[event_id]
                log.warning(
                    "matrix_undecryptable_given_up",
                    room=item.room_id,
                    event_id=event_id,
                    sender=item.event.sender,
                    reason=e2ee.undecryptable_reason(client, item.event),
                )
                await ledger.ack(item.batch, event_id)

    async def _message(
        self,
        client: AsyncClient,
        inbox: Inbox,
        ledger: SyncLedger,
        batch: Batch,
        room_id: str,
        event: Any,
    ) -> bool:
        """Hand a text message to the inbox if the policy answers it; True if it did."""
        content: Mapping[str, Any] = event.source.get("content") or {}
        relates = content.get("m.relates_to")
        relates = relates if isinstance(relates, Mapping) else {}
        sender: str = event.sender
        if relates.get("rel_type") == "m.replace":
            log.debug("matrix_message_ignored", sender=sender, reason="edit")
            return False
        room = client.rooms.get(room_id)
        members = _member_count(room)
        names = set(self._names)
        if room is not None and client.user_id in room.users:
            names.add(room.user_name(client.user_id) or "")
        decision = self.policy.decide(
            room_id=room_id,
            sender=sender,
            msgtype=str(content.get("msgtype", "")),
            content=content,
            member_count=members,
            display_names=names,
        )
        if not decision.answer:
            log.debug("matrix_message_ignored", sender=sender, reason=decision.reason)
            return False
        body = content.get("body")
        text = body if isinstance(body, str) else ""
        in_reply_to = relates.get("m.in_reply_to")
        if isinstance(in_reply_to, Mapping) and relates.get("is_falling_back") is not True:
            text = strip_reply_fallback(text)
        full_chars = len(text)
        if full_chars > self._cfg.max_text_chars:
            # One huge message would ride along in every request of the room until the next
            # consolidation; the model is told it sees only the beginning.
            text = text[: self._cfg.max_text_chars].rstrip() + TRUNCATED_NOTE
        # Only what the spec types it as is copied into the reply's relation.
        thread_root = (
            event_id_or_none(relates.get("event_id"))
            if relates.get("rel_type") == "m.thread"
            else None
        )
        event_id: str = event.event_id
        meta: dict[str, Any] = {
            "room_id": room_id,
            "event_id": event_id,
            "direct": members <= 2,
            "encrypted": bool(room is not None and room.encrypted),
            "sender_name": room.user_name(sender) if room is not None else sender,
        }
        ledger.add(batch, event_id)
        inbound = Inbound(
            channel=CHANNEL,
            source_id=event_id,
            session_id=SessionId(room_id),
            sender=sender,
            text=text,
            reply_to=Destination(CHANNEL, room_id),
            thread_root=thread_root,
            meta=meta,
            ack=functools.partial(self._ack, ledger, batch, room_id, event_id),
        )
        log.info(
            "matrix_message_received",
            sender=sender,
            chars=full_chars,
            truncated=full_chars > self._cfg.max_text_chars,
            reason=decision.reason,
            encrypted=meta["encrypted"],
        )
        self._start_typing(room_id, event_id)
        await inbox.put(inbound)
        return True

    async def _ack(self, ledger: SyncLedger, batch: Batch, room_id: str, event_id: str) -> None:
        await self._stop_typing(room_id, event_id)
        await ledger.ack(batch, event_id)

    def _remember(self, event_id: str) -> bool:
        """Record an event id; False if it was seen before in this run."""
        if event_id in self._seen:
            return False
        self._seen[event_id] = None
        if len(self._seen) > SEEN_MAX:
            self._seen.popitem(last=False)
        return True

    # --- typing notices ----------------------------------------------------------------------

    def _start_typing(self, room_id: str, event_id: str) -> None:
        if not self._cfg.typing_notice:
            return
        self._typing.setdefault(room_id, {})[event_id] = self._monotonic()
        self._typing_wakeup.set()

    async def _stop_typing(self, room_id: str, event_id: str) -> None:
        leases = self._typing.get(room_id)
        if leases is None or leases.pop(event_id, None) is None:
            return
        if leases:
            return
        del self._typing[room_id]
        client = self._client
        if client is not None:
            await self._send_typing(client, room_id, typing=False)

    async def _typing_loop(self, client: AsyncClient) -> None:
        """Keep the typing notice of every room with a turn in progress alive."""
        while True:
            self._typing_wakeup = anyio.Event()
            now = self._monotonic()
            for room_id, leases in list(self._typing.items()):
                # Each send awaits: an ack may have ended this room's turns meanwhile (and
                # `_stop_typing` sent the "stopped" notice). The snapshot is stale then.
                if self._typing.get(room_id) is not leases:
                    continue
                for event_id, began in list(leases.items()):
                    if now - began > TYPING_MAX_S:
                        del leases[event_id]
                if not leases:
                    self._typing.pop(room_id, None)
                    await self._send_typing(client, room_id, typing=False)
                else:
                    await self._send_typing(client, room_id, typing=True)
            with anyio.move_on_after(TYPING_REFRESH_S):
                await self._typing_wakeup.wait()

    async def _send_typing(self, client: AsyncClient, room_id: str, *, typing: bool) -> None:
        try:
            response = await call(
                "typing notice", client.room_typing(room_id, typing, timeout=TYPING_TIMEOUT_MS)
            )
        except TransientError as exc:
            log.debug("matrix_typing_failed", room=room_id, reason=str(exc))
            return
        if isinstance(response, ErrorResponse):
            log.debug("matrix_typing_failed", room=room_id, reason=response.message)

    # --- sending -----------------------------------------------------------------------------

    async def send(self, outbound: Outbound) -> None:
        client = self._client
        if client is None:
            raise DeliveryError("matrix is not connected")
        room_id = outbound.target
        if room_id not in client.rooms:
            raise PermanentError(f"the bot is not in the Matrix room {room_id}")
        reply_to = outbound.in_reply_to
        if reply_to is not None and reply_to.channel != CHANNEL:
            reply_to = None
        pieces = self._pieces(outbound.text)
        thread_root = event_id_or_none(reply_to.thread_root) if reply_to else None
        previous = reply_to.source_id if reply_to is not None else None
        for index, piece in enumerate(pieces):
            content = dict(piece)
            if thread_root:
                content["m.relates_to"] = {
                    "rel_type": "m.thread",
                    "event_id": thread_root,
                    "is_falling_back": index > 0,
                    "m.in_reply_to": {"event_id": previous},
                }
            elif index == 0 and previous:
                content["m.relates_to"] = {"m.in_reply_to": {"event_id": previous}}
            if index == 0 and reply_to is not None:
                content["m.mentions"] = {"user_ids": [reply_to.sender]}
            else:
                content["m.mentions"] = {}
            tx_id = _tx_id(reply_to, index, content.get("body", ""))
            previous = await self._room_send(client, room_id, content, tx_id)
        log.info(
            "matrix_reply_sent",
            room=room_id,
            events=len(pieces),
            chars=len(outbound.text),
            in_reply_to=reply_to.source_id if reply_to is not None else None,
        )
        if reply_to is not None:
            await self._stop_typing(room_id, reply_to.source_id)

    def _pieces(self, text: str) -> list[dict[str, Any]]:
        """Message contents for `text`, each small enough for one event."""
        if not text.strip():
            text = "(empty reply)"
        out: list[dict[str, Any]] = []
        todo = split_markdown(text, self._cfg.max_message_bytes)
        while todo:
            chunk = todo.pop(0)
            content = message_content(chunk, self._cfg.msgtype)
            size = len(chunk.encode("utf-8"))
            if content_size(content) > MAX_CONTENT_BYTES and size > 1_000:
                # HTML made it too big (e.g. a table of tiny cells): split this piece again.
                todo[:0] = split_markdown(chunk, max(1_000, size // 2))
                continue
            out.append(content)
        return out

    async def _room_send(
        self, client: AsyncClient, room_id: str, content: dict[str, Any], tx_id: str
    ) -> str:
        ignore_unverified = self._cfg.device_trust == "all"
        for attempt in (1, 2):
            if self._policy is not None:
                e2ee.apply_trust(client, self._cfg.device_trust, self._policy.user_allowed)
            try:
                response = await client.room_send(
                    room_id,
                    "m.room.message",
                    content,
                    tx_id=tx_id,
                    ignore_unverified_devices=ignore_unverified,
                )
            except OlmUnverifiedDeviceError as exc:
                # A device appeared between our trust pass and the send: mark it, retry.
                if attempt == 2:
                    raise DeliveryError(f"cannot encrypt for {room_id}: {describe(exc)}") from exc
                continue
            except NETWORK_ERRORS as exc:
                raise DeliveryError(f"homeserver unreachable ({describe(exc)})") from exc
            except (SquiddError, anyio.get_cancelled_exc_class()):
                raise
            except Exception as exc:  # nio's encryption errors: LocalProtocolError, etc.
                raise DeliveryError(f"cannot send to {room_id}: {describe(exc)}") from exc
            if isinstance(response, RoomSendResponse):
                event_id: str = response.event_id
                return event_id
            if isinstance(response, ErrorResponse):
                raise send_refusal(room_id, response)
            answer = type(response).__name__
            raise DeliveryError(f"sending to {room_id}: unexpected answer {answer}")
        raise DeliveryError(f"cannot send to {room_id}")


def _tx_id(reply_to: Inbound | None, index: int, body: str) -> str:
    """Stable for the same reply to the same message, so a retried send is not doubled."""
    if reply_to is None:
        return f"squidd-{uuid.uuid4().hex}"
    digest = hashlib.sha256(f"{reply_to.source_id}\0{index}\0{body}".encode()).hexdigest()
    return f"squidd-{digest[:32]}"


def event_id_or_none(value: Any) -> str | None:
    """`value` if it is an event id the spec allows, else None (a `42`, an object, junk)."""
    if isinstance(value, str) and _EVENT_ID_RE.fullmatch(value):
        return value
    return None


def _is_text_message(event: Any) -> bool:
    """A text message we can answer: a valid one, or one nio refused over an optional field
    (a non-string `formatted_body`) whose `body` is a proper string."""
    if isinstance(event, RoomMessageText | RoomMessageEmote | RoomMessageNotice):
        return True
    if not isinstance(event, BadEvent):
        return False
    source = event.source if isinstance(event.source, Mapping) else {}
    content = source.get("content")
    return (
        source.get("type") == "m.room.message"
        and isinstance(content, Mapping)
        and content.get("msgtype") in ("m.text", "m.emote", "m.notice")
        and isinstance(content.get("body"), str)
        and isinstance(event.sender, str)
        and isinstance(event.event_id, str)
    )


def _event_id(event: Any) -> str:
    event_id = getattr(event, "event_id", None)
    if not event_id:
        source = getattr(event, "source", None)
        if isinstance(source, Mapping):
            event_id = source.get("event_id")
    return event_id if isinstance(event_id, str) else ""


def _event_type(event: Any) -> str:
    source = getattr(event, "source", None)
    if isinstance(source, Mapping):
        return str(source.get("type", "?"))
    return type(event).__name__


def _bad_reason(event: Any) -> str:
    return str(getattr(event, "error", "") or type(event).__name__)


def _own_join_index(events: Sequence[Any], user_id: str) -> int | None:
    for index, event in enumerate(events):
        if (
            isinstance(event, RoomMemberEvent)
            and event.state_key == user_id
            and event.membership == "join"
            and event.prev_membership != "join"
        ):
            return index
    return None


def _member_count(room: Any) -> int:
    if room is None:
        return 2
    count: int = room.joined_count
    return max(count, 1)
