"""Trust by identity (`device_trust = "cross-signed"`): people, not devices, are trusted.

For each allowed user (and the bot's own account) the master key is pinned the first time
it is seen (`pins.json`). A device is trusted when the pinned identity's self-signing key
signed it: master -> self-signing -> device, every signature checked here, since nio knows
nothing of cross-signing. When an allowed user's master key is no longer the pinned one
(they reset their identity, or someone who controls their homeserver made a new one), that
user is held: none of their devices gets room keys, none of their messages is acted on, a
warning is logged, and the room is told once. `squidd matrix trust USER` leaves a request
(`trust-requests/`) that the daemon picks up on its next sync: the new key is pinned.

The answers of `/keys/query` come from the homeserver; a device counts only with the ed25519
key the query showed signed, so a key swapped under the same device id is not trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from squidd.channels.matrix.identity.api import MatrixApi
from squidd.channels.matrix.identity.cross_signing import (
    device_cross_signed,
    device_ed25519,
    fingerprint,
    public_identity,
)
from squidd.channels.matrix.identity.local import IdentityFiles

log = structlog.get_logger()


@dataclass
class IdentityTrust:
    """The pinned identities and which devices they signed, kept fresh by `refresh`."""

    api: MatrixApi
    files: IdentityFiles
    pins: dict[str, str] = field(default_factory=dict)
    # (user, device id) -> the ed25519 key the user's pinned identity signed
    signed: dict[tuple[str, str], str] = field(default_factory=dict)
    # user -> the master key now published, for users whose key is not the pinned one
    changed: dict[str, str] = field(default_factory=dict)
    loaded: bool = False

    async def load(self) -> None:
        self.pins = await self.files.load_pins()
        self.loaded = True

    def device_signed(self, user_id: str, device_id: str, ed25519: str) -> bool:
        """Whether the device, with this very key, is signed by its owner's pinned identity."""
        return user_id not in self.changed and self.signed.get((user_id, device_id)) == ed25519

    def held(self, user_id: str) -> bool:
        """An allowed user whose identity changed and was not accepted yet."""
        return user_id in self.changed

    async def refresh(self, users: Iterable[str]) -> list[str]:
        """Query the identities and devices of `users`; return those newly held."""
        wanted = sorted(set(users))
        if not wanted:
            return []
        if not self.loaded:
            await self.load()
        query = await self.api.query_keys(wanted)
        newly_held: list[str] = []
        pins_changed = False
        for user in wanted:
            for key in [k for k in self.signed if k[0] == user]:
                del self.signed[key]
            identity = public_identity(query, user)
            if identity is None:
                continue  # no cross-signing (a legacy client): no device of theirs is trusted
            pinned = self.pins.get(user)
            if pinned is None:
                self.pins[user] = identity.master
                pins_changed = True
                log.info("matrix_identity_pinned", user=user, master=fingerprint(identity.master))
            elif pinned != identity.master:
                if self.changed.get(user) != identity.master:
                    newly_held.append(user)
                    log.warning(
                        "matrix_identity_changed",
                        user=user,
                        pinned=fingerprint(pinned),
                        published=fingerprint(identity.master),
                        action=f"nothing is shared with or accepted from {user} until "
                        f"`squidd matrix trust {user}`",
                    )
                self.changed[user] = identity.master
                continue
            self.changed.pop(user, None)
            devices = query.get("device_keys", {}).get(user, {})
            if not isinstance(devices, dict):
                continue
            for device_id, keys in devices.items():
                if isinstance(keys, dict) and device_cross_signed(identity, keys, device_id):
                    ed25519 = device_ed25519(keys)
                    if ed25519 is not None:
                        self.signed[(user, device_id)] = ed25519
        if pins_changed:
            await self.files.save_pins(self.pins)
        return newly_held

    async def accept_requests(self) -> list[str]:
        """Apply the waiting `squidd matrix trust` requests; return the users to refresh."""
        requests = await self.files.take_requests()
        if not requests:
            return []
        if not self.loaded:
            await self.load()
        accepted: list[str] = []
        for user, master in requests:
            published = self.changed.get(user)
            if master is not None and published is not None and master != published:
                log.warning(
                    "matrix_trust_request_stale",
                    user=user,
                    requested=fingerprint(master),
                    published=fingerprint(published),
                )
                continue
            if published is not None:
                self.pins[user] = published
            else:
                # Not held (or not seen yet): forget the pin, the next query pins what it sees.
                self.pins.pop(user, None)
            self.changed.pop(user, None)
            accepted.append(user)
            log.warning(
                "matrix_identity_accepted", user=user, master=published and fingerprint(published)
            )
        await self.files.save_pins(self.pins)
        return accepted
