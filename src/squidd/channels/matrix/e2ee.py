"""End-to-end encryption chores that a bare `AsyncClient.sync()` does not do.

After every sync: upload our device and one-time keys when the server runs low, query the
device lists of users we share encrypted rooms with, and claim one-time keys to open Olm
sessions with their new devices. Then apply the trust policy:

* `allowlisted` (default): devices of allowed users (and the bot's own other devices) are
  marked verified the first time they are seen (trust on first use; the allowlist is the
  trust anchor); every other device is blacklisted, so it never receives the room keys of
  the bot's replies.
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


async def maintain_keys(client: AsyncClient) -> None:
    """Upload, query and claim keys as nio asks; errors are logged, the next sync retries."""
    if client.olm is None:
        return
    if client.should_upload_keys:
        _log_error("matrix_keys_upload_failed", await client.keys_upload())
    if client.should_query_keys:
        _log_error("matrix_keys_query_failed", await client.keys_query())
    if client.should_claim_keys:
        users = client.get_users_for_key_claiming()
        if users:
            _log_error("matrix_keys_claim_failed", await client.keys_claim(users))


def _log_error(event: str, response: Any) -> None:
    if isinstance(response, ErrorResponse):
        log.warning(event, errcode=response.status_code, reason=response.message)


def apply_trust(client: AsyncClient, mode: str, is_trusted_user: Callable[[str], bool]) -> None:
    """Mark the known devices of tracked users according to the trust policy."""
    if client.olm is None or mode == "all":
        return
    own = client.user_id
    for device in list(client.device_store):
        if device.deleted or (device.user_id == own and device.id == client.device_id):
            continue
        if device.user_id == own or is_trusted_user(device.user_id):
            _trust(client, device)
        elif not client.olm.is_device_blacklisted(device):
            if client.olm.is_device_verified(device):
                client.unverify_device(device)
            client.blacklist_device(device)
            log.info("matrix_device_not_trusted", user=device.user_id, device=device.id)


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
