"""Encrypted attachments as the Matrix spec defines them (`v2`), streamed both ways.

The file is AES-256-CTR encrypted with a fresh key and a 16-byte IV whose lower 64 bits
(the counter) start at zero; the SHA-256 of the ciphertext is taken as it goes. The event's
`file` carries the key as a JSON Web Key (URL-safe unpadded base64), the IV and the hash
(standard unpadded base64). AES from PyCryptodome (nio's own attachments use it, so it is
loaded with the channel anyway), base64 from `unpaddedbase64`: each chunk passes through
once, so no file ever sits whole in memory here.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from Crypto.Cipher import AES
from unpaddedbase64 import decode_base64, encode_base64

_BLOCK = 16
_COUNTER_SPACE = 1 << 64  # the IV's lower half counts blocks and must not wrap


class AttachmentError(Exception):
    """An encrypted attachment's `file` is malformed or its bytes fail the hash."""


@dataclass(frozen=True, slots=True)
class AttachmentKey:
    key: bytes
    iv: bytes

    @classmethod
    def fresh(cls) -> AttachmentKey:
        return cls(secrets.token_bytes(32), secrets.token_bytes(8) + bytes(8))


class Encryptor:
    """One pass over a file's plaintext: `update` encrypts a chunk and hashes its ciphertext
    before handing it out; `file_info` is the event's `file` (without `url`) for the bytes
    handed out so far. A second pass (an upload tried again) takes a new `Encryptor` with
    the same key: the same plaintext gives the same ciphertext."""

    def __init__(self, key: AttachmentKey) -> None:
        self._key = key
        # The whole 16-byte IV is the initial counter block, as the spec counts.
        self._cipher = AES.new(key.key, AES.MODE_CTR, nonce=b"", initial_value=key.iv)
        self._sha256 = hashlib.sha256()
        self.length = 0

    def update(self, chunk: bytes) -> bytes:
        out = self._cipher.encrypt(chunk)
        self._sha256.update(out)
        self.length += len(out)
        return out

    def file_info(self) -> dict[str, Any]:
        return {
            "v": "v2",
            "key": {
                "kty": "oct",
                "alg": "A256CTR",
                "ext": True,
                "k": encode_base64(self._key.key, urlsafe=True),
                "key_ops": ["encrypt", "decrypt"],
            },
            "iv": encode_base64(self._key.iv),
            "hashes": {"sha256": encode_base64(self._sha256.digest())},
        }


def _b64(value: Any) -> bytes:
    if not isinstance(value, str):
        raise AttachmentError("malformed encryption info")
    try:
        return decode_base64(value)
    except ValueError as exc:  # binascii.Error, or a character that is no ASCII
        raise AttachmentError("malformed encryption info") from exc


def _parse(file: Mapping[str, Any]) -> tuple[AttachmentKey, bytes]:
    key_info, hashes = file.get("key"), file.get("hashes")
    if not isinstance(key_info, Mapping) or not isinstance(hashes, Mapping):
        raise AttachmentError("malformed encryption info")
    key = AttachmentKey(_b64(key_info.get("k")), _b64(file.get("iv")))
    if len(key.key) != 32 or len(key.iv) != _BLOCK:
        raise AttachmentError("malformed encryption info")
    return key, _b64(hashes.get("sha256"))


async def decrypt(chunks: AsyncIterator[bytes], file: Mapping[str, Any]) -> AsyncIterator[bytes]:
    """Decrypt an encrypted attachment chunk by chunk; the ciphertext's SHA-256 must match
    the event's before the last chunk is let through. A counter that would run past the
    IV's lower 64 bits (senders start it at zero) is refused rather than carried."""
    key, expected = _parse(file)
    first_block = int.from_bytes(key.iv[8:], "big")
    cipher = AES.new(key.key, AES.MODE_CTR, nonce=b"", initial_value=key.iv)
    digest = hashlib.sha256()
    pending = b""
    seen = 0
    async for chunk in chunks:
        seen += len(chunk)
        if first_block + -(-seen // _BLOCK) > _COUNTER_SPACE:
            raise AttachmentError("the file overruns its counter")
        digest.update(chunk)
        if pending:
            yield pending
        pending = cipher.decrypt(chunk)
    if digest.digest() != expected:
        raise AttachmentError("the file does not match its hash")
    if pending:
        yield pending
