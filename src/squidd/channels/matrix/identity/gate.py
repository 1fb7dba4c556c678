"""The identity side of one Matrix connection: the bot's own identity made sure of at
connect, the identities of allowed users kept fresh, and the gate that decides whether an
allowed user's message may be acted on (device trust, see `trust` and `e2ee`).

`Remembered` is what outlives a reconnect: the identity status `squidd status` shows, the
devices whose events were already logged as not acted on (once per device), and the rooms
already told about an identity change (once per room and new key).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from nio import AsyncClient

from squidd.channels.matrix import e2ee
from squidd.channels.matrix.identity.account import IdentityStatus, OwnIdentity
from squidd.channels.matrix.identity.api import ApiError, MatrixApi
from squidd.channels.matrix.identity.local import IdentityFiles
from squidd.channels.matrix.identity.trust import IdentityTrust
from squidd.config.matrix import MatrixSettings
from squidd.secrets import secret_value

log = structlog.get_logger()


@dataclass(slots=True)
class Remembered:
    status: IdentityStatus | None = None
    # (sender, sender key) of devices whose events were not acted on, logged once each
    untrusted_logged: set[tuple[str, str]] = field(default_factory=set)
    # (room, user, master key) the room was told about: an identity change, said once
    held_told: set[tuple[str, str, str]] = field(default_factory=set)


class IdentityGate:
    """Cross-signing for one logged-in client."""

    def __init__(
        self, client: AsyncClient, settings: MatrixSettings, data_dir: Path, memory: Remembered
    ) -> None:
        self._client = client
        self._cfg = settings
        self._memory = memory
        self._user_id: str = client.user_id
        self.api = MatrixApi(
            settings.homeserver,
            self._user_id,
            client.access_token,
            timeout_s=settings.request_timeout_s,
        )
        self.files = IdentityFiles(data_dir)
        cross_signed = settings.device_trust == "cross-signed" and client.olm is not None
        self.trust = IdentityTrust(self.api, self.files) if cross_signed else None
        self._primed = False
        self.own: OwnIdentity | None = None

    async def close(self) -> None:
        await self.api.close()

    async def ensure_own(self) -> OwnIdentity:
        """The bot's device cross-signed by the account's one identity (identity/account)."""
        own = OwnIdentity(
            self.api,
            self.files,
            device_id=self._client.device_id,
            password=secret_value(self._cfg.password) or None,
        )
        try:
            status = await own.ensure()
        except ApiError as exc:
            # Refused for a reason a restart will not fix: E2EE goes on without the identity
            # (people on a current client then see an unverified device); status says why.
            log.warning("matrix_identity_failed", reason=str(exc))
            status = IdentityStatus(None, False, False, str(exc))
        self._memory.status = status
        self.own = own
        return own

    @property
    def ready(self) -> bool:
        """Whether device decisions may be made: in the cross-signed mode only once the
        identities were queried. Before that (a reply sent right after a restart) nio's
        decisions of the last run stand, so a person's device is never refused the room key
        only because its identity was not looked up yet."""
        return self.trust is None or self._primed

    @property
    def device_signed(self) -> e2ee.DeviceSigned | None:
        return self.trust.device_signed if self.trust is not None else None

    def apply_trust(self, user_allowed: Callable[[str], bool]) -> None:
        """nio's devices marked verified or blacklisted by the policy (`e2ee.apply_trust`),
        once `ready`."""
        if self.ready:
            e2ee.apply_trust(self._client, self._cfg.device_trust, user_allowed, self.device_signed)

    async def refresh(self, queried: set[str], user_allowed: Callable[[str], bool]) -> None:
        """The identities of the allowed users nio just queried (all known ones on the first
        round), with the operator's `squidd matrix trust` requests applied first."""
        trust = self.trust
        if trust is None:
            return
        client = self._client
        users = set(queried) if self._primed else set(client.device_store.users)
        users = {u for u in users if u == self._user_id or user_allowed(u)}
        try:
            users |= set(await trust.accept_requests())
            held = await trust.refresh(users)
        except ApiError as exc:
            log.warning("matrix_identity_query_failed", reason=str(exc))
            return
        self._primed = True
        for user in held:
            # Their devices may hold the current room keys: new ones for the next replies.
            for room_id, room in client.rooms.items():
                if room.encrypted and user in room.users:
                    client.invalidate_outbound_session(room_id)

    async def sender_trusted(
        self, room_id: str, event: Any, user_allowed: Callable[[str], bool]
    ) -> bool:
        """False for an allowed user's message that the device policy says not to act on:
        their identity changed and was not accepted, or the sending device is not trusted.
        The answer policy decides about everyone else (they are not answered anyway)."""
        sender: str = event.sender
        if self._cfg.device_trust == "all" or self._client.olm is None:
            return True
        if sender == self._user_id or not user_allowed(sender):
            return True
        trust = self.trust
        if trust is not None and trust.held(sender):
            log.info("matrix_message_ignored", sender=sender, reason="identity changed")
            await self._tell_held(room_id, sender, trust.changed[sender])
            return False
        if not getattr(event, "decrypted", False):
            return True
        reason = e2ee.untrusted_sender(self._client, room_id, event)
        if reason is None:
            return True
        device = (sender, str(getattr(event, "sender_key", "")))
        if device not in self._memory.untrusted_logged:
            self._memory.untrusted_logged.add(device)
            log.warning("matrix_device_untrusted", sender=sender, reason=reason)
        return False

    async def _tell_held(self, room_id: str, user: str, master: str) -> None:
        """Say once in the room why `user` is not answered. In plain text even in an
        encrypted room: their devices get no room keys, so they could not read it otherwise,
        and it says nothing secret."""
        told = (room_id, user, master)
        if told in self._memory.held_told:
            return
        self._memory.held_told.add(told)
        text = (
            f"{user} has a new identity (cross-signing keys). Until my operator accepts it "
            f"(squidd matrix trust {user}), I do not act on their messages or share keys "
            "with their devices."
        )
        digest = hashlib.sha256(f"{room_id}\0{user}\0{master}".encode()).hexdigest()
        try:
            await self.api.send_notice(room_id, f"squidd-held-{digest[:32]}", text)
        except ApiError as exc:
            log.warning("matrix_notice_failed", room=room_id, reason=str(exc))
