"""One logged-in client's sync lifecycle: first sync, the sync loop, each batch handed out.

Receiving, per sync response (a "batch"):
1. nio updates its room state and decrypts what it can; we then do the key chores
   (upload/query/claim) and apply the device trust policy;
2. invites from allowed users are accepted, others declined (`invites`);
3. each joined room's timeline is walked in order; a `limited` timeline is first completed
   with `/messages` back to the previous position, so nothing in a gap is skipped;
4. messages the policy answers (`events`) go to the inbox with an `ack` hook; the persisted
   sync position moves past the batch only when all of them were acked (`SyncLedger`).
   A media message's file is fetched off the loop, in its room's lane (`downloads`).

On the very first start (no persisted position) the initial sync only records where the
room histories end: nothing older is answered. After a restart the loop resumes from the
persisted position, so messages sent while the daemon was down are answered once (the
router's handled-id record prevents a second answer for anything re-delivered).

A `Connection` lives as long as its client; what must outlive a reconnect (event ids seen,
invites answered, events waiting for keys, the messages' marks, the sync ledger) is
`carried.Carried` from the channel. While it is served the connection is the channel's
`online.Session`: the parts built once per run ask it for its client, policy, trust pass
and signing identity. An event whose handing-on was cut short by the connection's end is
withdrawn (forgotten as seen, its batch never saving its position): the next connection
receives it again.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus
from nio import (
    AsyncClient,
    BadEvent,
    ErrorResponse,
    MegolmEvent,
    RoomMemberEvent,
    RoomMessage,
    SyncResponse,
    UnknownBadEvent,
    UnknownEvent,
)

from squidd.channels.matrix import e2ee, events, media
from squidd.channels.matrix.backfill import backfill
from squidd.channels.matrix.carried import Carried
from squidd.channels.matrix.client import TokenRejectedError, call, translate
from squidd.channels.matrix.downloads import Lanes, with_media
from squidd.channels.matrix.identity.gate import IdentityGate
from squidd.channels.matrix.ids import EventId, RoomId, SyncToken
from squidd.channels.matrix.invites import answer_invites
from squidd.channels.matrix.online import Identity
from squidd.channels.matrix.policy import Policy
from squidd.channels.matrix.reaction_answers import is_answer_reaction as answer
from squidd.channels.matrix.reaction_answers import read_reaction
from squidd.channels.matrix.state import Batch, MatrixFiles
from squidd.channels.matrix.verification.signing import SigningIdentity
from squidd.config.matrix import MatrixSettings
from squidd.core.backoff import Failures, reconnecting
from squidd.core.models import Inbound, InboundKind
from squidd.core.ports import ChannelState, Inbox
from squidd.errors import SquiddError, TransientError
from squidd.text import clean_text

log = structlog.get_logger()


class Connection:
    """`client` logged in for `inbox`; `policy` and the first sync come from `connect`, the
    bot's `signing` identity (with encryption on) from the first sync's handing out."""

    def __init__(
        self,
        client: AsyncClient,
        inbox: Inbox,
        *,
        settings: MatrixSettings,
        files: MatrixFiles,
        carried: Carried,
    ) -> None:
        self.client = client
        self._inbox = inbox
        self._settings = settings
        self._files = files
        self._carried = carried
        self._user_id: str = client.user_id
        self._ledger = carried.ledger(self._user_id, files)
        fetch = functools.partial(
            with_media, client, sink=carried.media, max_bytes=carried.max_download_bytes
        )
        self._lanes = Lanes(self._hand_on, fetch, forget=carried.forget, on_failure=self._end)
        self._loop: anyio.CancelScope | None = None
        self._names: set[str] = set()
        self._policy: Policy | None = None
        self._signing: Identity | None = None
        self.identity = IdentityGate(client, settings, files.root.parent, carried.identity)
        self._filter: dict[str, Any] = {
            "room": {
                "timeline": {"limit": settings.timeline_limit},
                "state": {"lazy_load_members": False},
                "ephemeral": {"not_types": ["*"]},
            },
            "presence": {"not_types": ["*"]},
        }

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            raise RuntimeError("the Matrix policy is built when the channel connects")
        return self._policy

    @property
    def signing(self) -> Identity | None:
        """The bot's cross-signing identity for verifications, once made sure of."""
        return self._signing

    async def connect(self) -> tuple[SyncResponse, SyncToken | None]:
        """Build the policy and do the first sync; return it and the position it started at."""
        self._policy = await self._build_policy()
        await self._carried.verifications.restore(self._files.root)
        since = await self._files.load_sync_token(self._user_id)
        # Full state on every start: nio keeps no room state across restarts, and the
        # members and encryption status of every room are needed to answer correctly.
        response = await self._sync(since=since, full_state=True, wait=False)
        return response, since

    async def serve(
        self, response: SyncResponse, since: SyncToken | None, task_status: TaskStatus[None]
    ) -> None:
        """Hand out the first sync, report ready, then follow the sync loop until it fails."""
        # The loop's (or a download lane's) error is re-raised outside the task group, so the
        # supervisor sees a PermanentError / TransientError rather than an exception group.
        failure: SquiddError | None = None
        async with anyio.create_task_group() as tg:
            await tg.start(self._lanes.run)
            with anyio.CancelScope() as self._loop:
                try:
                    await self._first(response, since)
                    task_status.started()
                    tg.start_soon(self._carried.marks.run, self.client)
                    await self._sync_loop(response.next_batch)
                except SquiddError as exc:
                    failure = exc
            failure = failure or self._lanes.failure
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure

    def _end(self) -> None:
        """A download lane failed: end the sync loop (`serve` raises the lane's error)."""
        if self._loop is not None:
            self._loop.cancel()

    async def _first(self, response: SyncResponse, since: SyncToken | None) -> None:
        client = self.client
        await self._load_names()
        if since is None:
            batch = self._ledger.open(response.next_batch)
            await self._chores()
            await self._carried.verifications.on_to_device(response.to_device_events)
            await answer_invites(self.client, self.policy, response, self._carried.invites_seen)
            for info in response.rooms.join.values():
                for event in info.timeline.events:
                    self._carried.remember(events.event_id(event))
            await self._ledger.seal(batch)
            log.info("matrix_first_start", history="not answered", rooms=len(response.rooms.join))
        else:
            await self._handle_batch(response, since)
        if client.olm is not None:
            own = await self.identity.ensure_own()
            self._signing = SigningIdentity(self.identity.api, own)
        await self._carried.verifications.end_interrupted()  # a restart cut them
        log.info(
            "matrix_connected",
            user=self._user_id,
            device=client.device_id,
            e2ee=client.olm is not None,
            fingerprint=e2ee.own_fingerprint(client),
            rooms=len(client.rooms),
        )
        self._inbox.report(
            ChannelState.CONNECTED, f"{self._user_id} on {self._settings.homeserver}"
        )

    async def _sync_loop(self, since: SyncToken) -> None:
        """Sync after sync, through `core.backoff.reconnecting` (the loop both channels run)."""
        position = since

        async def one_sync() -> None:
            nonlocal position
            response = await self._sync(since=position, wait=True)
            position = await self._handle_batch(response, position)

        def on_retry(exc: TransientError, delay: float) -> None:
            log.warning(
                "matrix_sync_failed",
                attempt=failures.count,
                retry_in_s=round(delay, 2),
                reason=str(exc),
            )
            self._inbox.report(
                ChannelState.RECONNECTING, f"{exc}; retry {failures.count} in {delay:.1f}s"
            )

        def on_recovered(failed: int) -> None:
            log.info("matrix_reconnected", after_attempts=failed)
            self._inbox.report(
                ChannelState.CONNECTED, f"{self._user_id} on {self._settings.homeserver}"
            )

        failures = Failures(self._carried.backoff)
        try:
            await reconnecting(one_sync, failures, on_retry=on_retry, on_recovered=on_recovered)
        except TokenRejectedError as exc:
            await self._token_rejected(exc)

    async def _token_rejected(self, exc: TokenRejectedError) -> None:
        if self._settings.access_token is None and self._settings.password is not None:
            # A kept password login went stale: forget it; the restart logs in again.
            await self._files.forget_credentials()
            raise TransientError(f"{exc}; logging in again with the password") from exc
        self._inbox.report(ChannelState.FAILED, str(exc))
        log.error("matrix_token_rejected", reason=str(exc))
        raise exc

    async def _sync(
        self, *, since: SyncToken | None, wait: bool, full_state: bool = False
    ) -> SyncResponse:
        timeout_ms = int(self._settings.sync_timeout_s * 1000) if wait else 0
        response = await call(
            "sync",
            self.client.sync(
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

    async def _build_policy(self) -> Policy:
        settings = self._settings
        return Policy.build(
            self._user_id,
            allowed_users=settings.allowed_users,
            allowed_servers=settings.allowed_servers,
            allowed_rooms=await self._resolve_rooms(settings.allowed_rooms),
            open_rooms=await self._resolve_rooms(settings.open_rooms),
            session_scope=settings.session_scope,
            room_scopes=settings.room_session_scope,
            channel=self._carried.channel,
            siblings=self._carried.siblings,
        )

    async def _resolve_rooms(self, rooms: Sequence[str]) -> list[str]:
        resolved: list[str] = []
        for room in rooms:
            if not room.startswith("#"):
                resolved.append(room)
                continue
            response = await call("resolving a room alias", self.client.room_resolve_alias(room))
            if isinstance(response, ErrorResponse):
                log.warning("matrix_room_alias_unresolved", alias=room, reason=response.message)
                continue
            resolved.append(response.room_id)
        return resolved

    async def _load_names(self) -> None:
        localpart = self._user_id.split(":", 1)[0].lstrip("@")
        self._names = {localpart}
        response = await call("reading the profile", self.client.get_displayname(self._user_id))
        if not isinstance(response, ErrorResponse) and response.displayname:
            self._names.add(clean_text(response.displayname))

    async def _chores(self) -> None:
        queried: set[str] = await call("key maintenance", e2ee.maintain_keys(self.client))
        await self.identity.refresh(queried, self.policy.user_allowed)
        self.apply_trust()

    def apply_trust(self) -> None:
        """Mark every known device as the trust policy says (also before each send)."""
        self.identity.apply_trust(self.policy.user_allowed)

    # --- one batch ---------------------------------------------------------------------------

    async def _handle_batch(self, response: SyncResponse, since: SyncToken | None) -> SyncToken:
        """Hand out a sync response; return the position to sync from next."""
        ledger = self._ledger
        batch = ledger.open(response.next_batch)
        try:
            await self._chores()
            await self._carried.verifications.on_to_device(response.to_device_events)
            await answer_invites(self.client, self.policy, response, self._carried.invites_seen)
            for room_id, info in response.rooms.join.items():
                timeline = list(info.timeline.events)
                joined_at = events.own_join_index(timeline, self._user_id)
                if joined_at is not None:
                    # A room we just joined: what came before our join is history.
                    timeline = timeline[joined_at + 1 :]
                elif info.timeline.limited and since and info.timeline.prev_batch:
                    gap = await backfill(self.client, room_id, info.timeline.prev_batch, since)
                    timeline = gap + timeline
                for event in timeline:
                    await self._handle_event(batch, room_id, event)
            await self._carried.undecrypted.retry(self.client, ledger, self._late, self._inbox)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await ledger.abandon(batch)
            raise
        await ledger.seal(batch)
        next_batch = SyncToken(response.next_batch)
        return next_batch

    async def _handle_event(self, batch: Batch, room_id: RoomId, event: Any) -> None:
        event_id = events.event_id(event)
        if not event_id:
            log.info("matrix_event_malformed", room=room_id, reason=events.bad_reason(event))
            return
        if not self._carried.remember(event_id):
            log.debug("matrix_event_duplicate", room=room_id, event_id=event_id)
            return
        with structlog.contextvars.bound_contextvars(room=room_id, event_id=event_id):
            try:
                await self._dispatch(batch, room_id, event)
            except SquiddError:
                raise
            except Exception:  # the per-event boundary: one odd event must not stop the loop
                log.exception("matrix_event_failed")

    async def _dispatch(self, batch: Batch, room_id: RoomId, event: Any) -> None:
        if await self._carried.verifications.take(room_id, event):
            return
        if isinstance(event, MegolmEvent):
            await self._carried.undecrypted.hold(
                self.client, self.policy, self._ledger, batch, room_id, event
            )
        elif events.is_text_message(event) or media.is_media_message(event) or answer(event):
            await self._message(batch, room_id, event)
        elif isinstance(event, BadEvent | UnknownBadEvent):
            log.info(
                "matrix_event_malformed",
                type=events.event_type(event),
                reason=events.bad_reason(event),
            )
        elif isinstance(event, UnknownEvent | RoomMessage):
            log.debug(
                "matrix_event_ignored", type=events.event_type(event), reason="not a text message"
            )
        elif not isinstance(event, RoomMemberEvent):
            log.debug("matrix_event_ignored", type=events.event_type(event), reason="not a message")

    async def _late(self, batch: Batch, room_id: RoomId, event: Any) -> bool:
        """An event decrypted after its keys came late: a message, or a verification step."""
        if await self._carried.verifications.take(room_id, event):
            return False
        if events.is_text_message(event) or media.is_media_message(event) or answer(event):
            return await self._message(batch, room_id, event)
        return False

    async def _message(self, batch: Batch, room_id: RoomId, event: Any) -> bool:
        """Hand a message to the inbox (a media one via its room's lane) if the policy answers
        it; True if it did (its ack then settles it in the ledger)."""
        event_id: EventId = event.event_id
        if not await self.identity.sender_trusted(room_id, event, self.policy.user_allowed):
            return False
        read = read_reaction if answer(event) else events.read_message
        inbound = read(
            event,
            room_id=room_id,
            room=self.client.rooms.get(room_id),
            own_user_id=self._user_id,
            names=self._names,
            policy=self.policy,
            max_text_chars=self._settings.max_text_chars,
            ack=functools.partial(self._ack, batch, room_id, event_id),
        )
        if inbound is None:
            return False
        given_up = functools.partial(self._given_up, batch, room_id, event_id)
        inbound = dataclasses.replace(inbound, on_undeliverable=given_up)
        self._ledger.add(batch, event_id)
        content = media.media_content(event)
        if content is not None or self._lanes.busy(room_id):
            self._lanes.push(room_id, inbound, content)
        else:
            await self._hand_on(room_id, inbound)
        return True

    async def _hand_on(self, room_id: RoomId, inbound: Inbound) -> None:
        event_id = EventId(inbound.source_id)
        if inbound.kind is not InboundKind.REACTION:  # an answer by reaction: no marks
            self._carried.marks.received(room_id, event_id)
        try:
            await self._inbox.put(inbound)
        except anyio.get_cancelled_exc_class():
            # The connection ends before the message was handed on: the next one gets it.
            self._ledger.withdraw(event_id)
            self._carried.forget(event_id)
            raise

    async def _ack(self, batch: Batch, room_id: RoomId, event_id: EventId) -> None:
        await self._carried.marks.settled(room_id, event_id, failed=False)
        await self._ledger.ack(batch, event_id)

    async def _given_up(self, batch: Batch, room_id: RoomId, event_id: EventId, _: str) -> None:
        """Done without an answer (refused for good, parked): ❌, then settled like an ack."""
        await self._carried.marks.settled(room_id, event_id, failed=True)
        await self._ledger.ack(batch, event_id)
