"""End-to-end encryption chores that a bare `AsyncClient.sync()` does not do.

After every sync: upload our device and one-time keys when the server runs low, query the
device lists of users we share encrypted rooms with, and claim one-time keys to open Olm
sessions with their new devices. Then apply the trust policy:

* `cross-signed` (default): a device of an allowed user (or of the bot's own account) is
  marked verified when that user's pinned identity signed it (`identity/trust`); every
  other device is blacklisted, so it never receives the room keys of the bot's replies;
* `allowlisted`: devices of allowed users (and the bot's own other devices) are marked
  verified the first time they are seen (trust on first use; the allowlist is the trust
  anchor), for people on clients without cross-signing; every other device is blacklisted;
* `all`: no device is marked; replies are encrypted for every device in the room.

An event that cannot be decrypted is logged with the reason and retried when new keys
arrive; it never crashes the loop. One that no key can ever open (`malformed_megolm`: an
unknown algorithm, a session id or key that is no base64 key) is not waited for, and no key
is requested for it: anyone in a room can send such junk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import structlog
from nio import AsyncClient, ErrorResponse, MegolmEvent

log = structlog.get_logger()

MEGOLM = "m.megolm.v1.aes-sha2"
# Unpadded base64 of a 32-byte key is 43 characters; allow padding and URL-safe base64.
_KEY_RE = re.compile(r"[A-Za-z0-9+/_-]{43}={0,2}")
_CIPHERTEXT_RE = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")


async def maintain_keys(client: AsyncClient) -> set[str]:
    """Upload, query and claim keys as nio asks; errors are logged, the next sync retries.
    Returns the users whose device keys were queried."""
    queried: set[str] = set()
    if client.olm is None:
        return queried
    if client.should_upload_keys:
        _log_error("matrix_keys_upload_failed", await client.keys_upload())
    if client.should_query_keys:
        queried = set(client.users_for_key_query)
        _log_error("matrix_keys_query_failed", await client.keys_query())
    if client.should_claim_keys:
        users = client.get_users_for_key_claiming()
        if users:
            _log_error("matrix_keys_claim_failed", await client.keys_claim(users))
    return queried


def _log_error(event: str, response: Any) -> None:
    if isinstance(response, ErrorResponse):
        log.warning(event, errcode=response.status_code, reason=response.message)


# (user id, device id, ed25519 key) -> whether the owner's pinned identity signed it
DeviceSigned = Callable[[str, str, str], bool]


def apply_trust(
    client: AsyncClient,
    mode: str,
    is_trusted_user: Callable[[str], bool],
    device_signed: DeviceSigned | None = None,
) -> None:
    """Mark the known devices of tracked users according to the trust policy. In the
    `cross-signed` mode without `device_signed` (no identity checks yet) nothing is trusted."""
    if client.olm is None or mode == "all":
        return
    own = client.user_id
    for device in list(client.device_store):
        if device.deleted or (device.user_id == own and device.id == client.device_id):
            continue
        allowed = device.user_id == own or is_trusted_user(device.user_id)
        if (allowed and mode == "allowlisted") or (
            allowed and device_signed and device_signed(device.user_id, device.id, device.ed25519)
        ):
            _trust(client, device)
        elif not client.olm.is_device_blacklisted(device):
            if client.olm.is_device_verified(device):
                client.unverify_device(device)
            client.blacklist_device(device)
            log.info(
                "matrix_device_not_trusted",
                user=device.user_id,
                device=device.id,
                reason="not cross-signed by its owner's pinned identity"
                if allowed
                else "not an allowed user",
            )


def _trust(client: AsyncClient, device: Any) -> None:
    if client.olm.is_device_blacklisted(device):
        # The user was allowlisted after we refused the device: lift the refusal.
        client.unblacklist_device(device)
    if not client.olm.is_device_verified(device):
        client.verify_device(device)
        log.info(
            "matrix_device_trusted",
            user=device.user_id,
            device=device.id,
            fingerprint=format_fingerprint(device.ed25519),
        )


def format_fingerprint(key: str) -> str:
    """An ed25519 key in groups of four, the way clients show it for manual verification."""
    return " ".join(key[i : i + 4] for i in range(0, len(key), 4))


def own_fingerprint(client: AsyncClient) -> str:
    if client.olm is None:
        return ""
    key: str = client.olm.account.identity_keys["ed25519"]
    return format_fingerprint(key)


def untrusted_sender(client: AsyncClient, room_id: str, event: Any) -> str | None:
    """Why a decrypted event's sending device is not trusted, or None if it is: a known,
    verified device whose keys match the room key's session, not a forwarded key."""
    if client.olm is None or getattr(event, "verified", False):
        return None  # nio checked it at decryption: a verified device, matching keys
    sender_key = getattr(event, "sender_key", None)
    device = next(
        (
            d
            for d in client.device_store.active_user_devices(event.sender)
            if d.curve25519 == sender_key
        ),
        None,
    )
    if device is None:
        return "unknown device"
    if not client.olm.is_device_verified(device):
        return f"device {device.id} is not trusted"
    session = client.olm.inbound_group_store.get(
        room_id, sender_key, getattr(event, "session_id", "")
    )
    if session is None or session.ed25519 != device.ed25519:
        return f"the room key does not match device {device.id}"
    if session.forwarding_chain:
        return "the room key was forwarded, not sent by the device"
    return None


def try_decrypt(client: AsyncClient, event: MegolmEvent) -> Any | None:
    """The decrypted event, or None while its room key is missing."""
    if client.olm is None:
        return None
    try:
        return client.decrypt_event(event)
    except Exception:  # noqa: BLE001 - nio raises several unrelated types for "not yet"
        return None


def undecryptable_reason(client: AsyncClient, event: MegolmEvent) -> str:
    if client.olm is None:
        return "encryption is disabled in the configuration (matrix.e2ee = false)"
    try:
        client.decrypt_event(event)
    except Exception as exc:  # noqa: BLE001 - we only want the reason text
        return str(exc) or type(exc).__name__
    return "decryptable now"


def malformed_megolm(event: MegolmEvent) -> str | None:
    """Why no room key can ever decrypt `event`, or None if it looks like a Megolm event."""
    content = event.source.get("content") if isinstance(event.source, dict) else None
    if not isinstance(content, dict):
        return "no content"
    if content.get("algorithm") != MEGOLM:
        return "unsupported algorithm"
    for field in ("session_id", "sender_key"):
        value = content.get(field)
        if not isinstance(value, str) or not _KEY_RE.fullmatch(value):
            return f"{field} is not a base64 key"
    ciphertext = content.get("ciphertext")
    if not isinstance(ciphertext, str) or not _CIPHERTEXT_RE.fullmatch(ciphertext):
        return "ciphertext is not base64"
    device_id = content.get("device_id")
    if device_id is not None and not isinstance(device_id, str):
        return "device_id is not a string"
    return None
