"""Secret storage (`m.secret_storage.v1.aes-hmac-sha2`): the private cross-signing keys kept
encrypted in the account's own account data, opened with a recovery key.

The spec's recipe, per secret: HKDF-SHA-256 over the 32-byte storage key (salt 32 zero
bytes, info the secret's name) gives 64 bytes, an AES-256 key then an HMAC key; the secret
is AES-CTR encrypted with a random 16-byte IV whose bit 63 is cleared, and the HMAC-SHA-256
of the ciphertext authenticates it. The key's description (`m.secret_storage.key.<id>`)
carries the IV and MAC of 32 zero bytes encrypted under the name "", which is how a typed
recovery key is checked. `m.secret_storage.default_key` names the key in use.

The recovery key is the storage key written for people: the bytes 0x8B 0x01, the key, a
parity byte (all previous bytes XORed), in base58 (Bitcoin's alphabet), in groups of four.
The secrets are the unpadded base64 of each private key's seed, as Element writes them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import string
from collections.abc import Mapping
from typing import Any

import base58
from Crypto.Cipher import AES
from Crypto.Hash import SHA256
from Crypto.Protocol.KDF import HKDF
from unpaddedbase64 import encode_base64

from squidd.channels.matrix.identity.api import MatrixApi
from squidd.channels.matrix.identity.cross_signing import SECRET_NAMES, CrossSigningKeys
from squidd.channels.matrix.identity.signed_json import b64decode

ALGORITHM = "m.secret_storage.v1.aes-hmac-sha2"
DEFAULT_KEY = "m.secret_storage.default_key"
KEY_PREFIX = "m.secret_storage.key."
RECOVERY_PREFIX = b"\x8b\x01"
KEY_BYTES = 32


class SecretStorageError(ValueError):
    """A recovery key that is no recovery key, does not fit, or a secret that is damaged."""


# --- the recovery key ---------------------------------------------------------------------


def _parity(data: bytes) -> int:
    parity = 0
    for byte in data:
        parity ^= byte
    return parity


def encode_recovery_key(key: bytes) -> str:
    if len(key) != KEY_BYTES:
        raise ValueError("a secret storage key has 32 bytes")
    raw = RECOVERY_PREFIX + key
    text = base58.b58encode(raw + bytes([_parity(raw)])).decode("ascii")
    return " ".join(text[i : i + 4] for i in range(0, len(text), 4))


def decode_recovery_key(text: str) -> bytes:
    """The storage key in a recovery key as typed (whitespace does not matter)."""
    compact = "".join(text.split())
    try:
        raw = base58.b58decode(compact)
    except ValueError:
        raise SecretStorageError("the recovery key is not base58 text") from None
    if len(raw) != len(RECOVERY_PREFIX) + KEY_BYTES + 1:
        raise SecretStorageError("the recovery key has the wrong length")
    if raw[:2] != RECOVERY_PREFIX:
        raise SecretStorageError("the recovery key has the wrong prefix")
    if _parity(raw[:-1]) != raw[-1]:
        raise SecretStorageError("the recovery key's check digit does not match (a typo?)")
    return raw[2:-1]


# --- encrypting one secret ------------------------------------------------------------------


# AES-CTR and HKDF from PyCryptodome, which nio loads anyway (not `cryptography`: 6 MiB more
# resident memory at every start, docs/performance.md); HMAC from the standard library.


def _derive(key: bytes, name: str) -> tuple[bytes, bytes]:
    okm = HKDF(key, 64, bytes(32), SHA256, context=name.encode())
    assert isinstance(okm, bytes)  # noqa: S101 - one key asked for: bytes, not a tuple
    return okm[:32], okm[32:]


def _mac(mac_key: bytes, data: bytes) -> bytes:
    return hmac.digest(mac_key, data, hashlib.sha256)


def _b64(data: bytes) -> str:
    # Padded, as Element writes it; readers accept both.
    return base64.b64encode(data).decode("ascii")


def encrypt(key: bytes, name: str, plaintext: bytes, *, iv: bytes | None = None) -> dict[str, str]:
    aes_key, mac_key = _derive(key, name)
    if iv is None:
        fresh = bytearray(secrets.token_bytes(16))
        fresh[8] &= 0x7F  # bit 63 cleared: AES-CTR implementations differ on counter overflow
        iv = bytes(fresh)
    # The whole 16-byte IV is the initial counter block, as the spec (and Element) count.
    ciphertext = AES.new(aes_key, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(plaintext)
    return {
        "iv": _b64(iv),
        "ciphertext": _b64(ciphertext),
        "mac": _b64(_mac(mac_key, ciphertext)),
    }


def decrypt(key: bytes, name: str, encrypted: Mapping[str, Any]) -> bytes:
    aes_key, mac_key = _derive(key, name)
    try:
        iv = b64decode(encrypted["iv"])
        ciphertext = b64decode(encrypted["ciphertext"])
        mac = b64decode(encrypted["mac"])
    except (KeyError, ValueError):
        raise SecretStorageError(f"the stored secret {name} is damaged") from None
    if len(iv) != 16:
        raise SecretStorageError(f"the stored secret {name} is damaged")
    if not hmac.compare_digest(_mac(mac_key, ciphertext), mac):
        raise SecretStorageError(f"the recovery key does not open the secret {name}")
    return AES.new(aes_key, AES.MODE_CTR, nonce=b"", initial_value=iv).decrypt(ciphertext)


def key_description(key: bytes, name: str = "squidd recovery key") -> dict[str, str]:
    check = encrypt(key, "", bytes(32))
    return {"name": name, "algorithm": ALGORITHM, "iv": check["iv"], "mac": check["mac"]}


def key_fits(key: bytes, description: Mapping[str, Any]) -> bool:
    """Whether `key` is the one `description` was made for (its zero-message check)."""
    if description.get("algorithm") != ALGORITHM:
        return False
    iv, mac = description.get("iv"), description.get("mac")
    if not isinstance(iv, str) or not isinstance(mac, str):
        return True  # the spec: without iv and mac the key cannot be checked; assume it fits
    try:
        expected = b64decode(mac)
        check = encrypt(key, "", bytes(32), iv=b64decode(iv))
    except ValueError:
        return False
    return b64decode(check["mac"]) == expected


def new_key_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(32))


# --- the account's secret storage -----------------------------------------------------------


async def store_keys(api: MatrixApi, storage_key: bytes, keys: CrossSigningKeys) -> str:
    """Put the three private keys into the account's secret storage under a new default key;
    return the key id. The secrets are written before the default key points at them."""
    key_id = new_key_id()
    await api.put_account_data(KEY_PREFIX + key_id, key_description(storage_key))
    for usage, seed in keys.seeds().items():
        name = SECRET_NAMES[usage]
        encrypted = encrypt(storage_key, name, encode_base64(seed).encode("ascii"))
        await api.put_account_data(name, {"encrypted": {key_id: encrypted}})
    await api.put_account_data(DEFAULT_KEY, {"key": key_id})
    return key_id


async def load_keys(api: MatrixApi, storage_key: bytes) -> CrossSigningKeys:
    """The private keys from the account's secret storage, opened with `storage_key`."""
    default = await api.get_account_data(DEFAULT_KEY)
    key_id = default.get("key") if default else None
    if not isinstance(key_id, str):
        raise SecretStorageError("the account has no secret storage (no default key)")
    description = await api.get_account_data(KEY_PREFIX + key_id)
    if description is None:
        raise SecretStorageError("the account's secret storage key has no description")
    if not key_fits(storage_key, description):
        raise SecretStorageError("this recovery key does not fit the account's secret storage")
    seeds: dict[str, bytes] = {}
    for usage, name in SECRET_NAMES.items():
        content = await api.get_account_data(name)
        encrypted = (content or {}).get("encrypted")
        entry = encrypted.get(key_id) if isinstance(encrypted, Mapping) else None
        if not isinstance(entry, Mapping):
            raise SecretStorageError(f"secret storage holds no {name}")
        plaintext = decrypt(storage_key, name, entry)
        try:
            seeds[usage] = b64decode(plaintext.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise SecretStorageError(f"the stored secret {name} is damaged") from exc
    try:
        return CrossSigningKeys.from_seeds(seeds)
    except ValueError as exc:
        raise SecretStorageError("a stored cross-signing key is no Ed25519 seed") from exc


async def holds_keys(api: MatrixApi) -> bool:
    """Whether the account's secret storage has all three keys under its default key
    (encrypted: nothing is opened)."""
    default = await api.get_account_data(DEFAULT_KEY)
    key_id = default.get("key") if default else None
    if not isinstance(key_id, str):
        return False
    for name in SECRET_NAMES.values():
        content = await api.get_account_data(name)
        encrypted = (content or {}).get("encrypted")
        if not isinstance(encrypted, Mapping) or key_id not in encrypted:
            return False
    return True
