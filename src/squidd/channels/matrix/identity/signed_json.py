"""Signed JSON as the Matrix spec defines it: canonical bytes, Ed25519, unpadded base64
(`unpaddedbase64`).

Ed25519 comes from PyCryptodome, which nio loads for its own attachments anyway;
`cryptography` would add 6 MiB to the resident set of every daemon with Matrix, since the
keys are loaded at each start (docs/performance.md). A key is its 32-byte seed (RFC 8032),
so a new one is 32 random bytes.

A signature covers the object's canonical JSON (`canonicaljson`, the encoder Synapse uses)
without its `signatures` and `unsigned` members, and is stored under
`signatures[<user id>]["ed25519:<public key or device id>"]`. Cross-signing keys are named
by their own public key. The spec's appendix test vectors are in the tests.
"""

from __future__ import annotations

import binascii
import copy
import re
import secrets
from collections.abc import Mapping
from typing import Any

from canonicaljson import encode_canonical_json
from Crypto.PublicKey import ECC
from Crypto.Signature import eddsa
from unpaddedbase64 import decode_base64, encode_base64

SEED_BYTES = 32


# Whole groups of four, then a last group of two or three characters, padded or not (or
# padding alone after whole groups, which the strict stdlib decoder let through too).
_C = "[A-Za-z0-9+/_-]"
_BASE64 = re.compile(rf"(?:{_C}{{4}})*(?:{_C}{{2}}={{0,2}}|{_C}{{3}}=?)?|(?:{_C}{{4}})+=+")


def b64decode(text: str) -> bytes:
    """Standard or URL-safe base64, padded or not, decoded by `unpaddedbase64`, which skips
    characters outside the alphabet and stray padding: those are refused here first.
    ValueError when it is none."""
    if not isinstance(text, str):
        raise ValueError("not a base64 string")  # noqa: TRY004 - callers expect ValueError
    cleaned = text.strip()
    if not _BASE64.fullmatch(cleaned):
        raise ValueError("not a base64 string")
    try:
        return decode_base64(cleaned)
    except binascii.Error as exc:
        raise ValueError("not a base64 string") from exc


def canonical_bytes(obj: Mapping[str, Any]) -> bytes:
    """The bytes a signature covers: canonical JSON without `signatures` and `unsigned`."""
    stripped = {k: v for k, v in obj.items() if k not in ("signatures", "unsigned")}
    data: bytes = encode_canonical_json(stripped)
    return data


class SigningKey:
    """An Ed25519 key pair made from a 32-byte seed (what secret storage keeps)."""

    def __init__(self, seed: bytes) -> None:
        if len(seed) != SEED_BYTES:
            raise ValueError("an Ed25519 seed has 32 bytes")
        self.seed = seed
        self._private = ECC.construct(curve="Ed25519", seed=seed)
        self.public = encode_base64(self._private.public_key().export_key(format="raw"))

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(secrets.token_bytes(SEED_BYTES))

    @property
    def key_id(self) -> str:
        return f"ed25519:{self.public}"

    def sign_bytes(self, data: bytes) -> str:
        return encode_base64(eddsa.new(self._private, "rfc8032").sign(data))

    def sign(
        self, obj: Mapping[str, Any], signer: str, key_id: str | None = None
    ) -> dict[str, Any]:
        """A copy of `obj` with this key's signature added under `signer`."""
        signed = copy.deepcopy(dict(obj))
        signature = self.sign_bytes(canonical_bytes(signed))
        signatures = signed.setdefault("signatures", {})
        signatures.setdefault(signer, {})[key_id or self.key_id] = signature
        return signed


def verify(obj: Mapping[str, Any], signer: str, key_id: str, public_key: str) -> bool:
    """Whether `obj` carries a valid signature of `public_key` as `signer` / `key_id`.

    Anything malformed (no such signature, bad base64, a key of the wrong size) is False.
    """
    signatures = obj.get("signatures")
    if not isinstance(signatures, Mapping):
        return False
    by_signer = signatures.get(signer)
    if not isinstance(by_signer, Mapping):
        return False
    signature = by_signer.get(key_id)
    if not isinstance(signature, str):
        return False
    try:
        key = eddsa.import_public_key(b64decode(public_key))
        eddsa.new(key, "rfc8032").verify(canonical_bytes(obj), b64decode(signature))
    except (ValueError, TypeError):  # a bad signature is a ValueError
        return False
    return True
