"""One SAS exchange (`m.sas.v1`) from the side that accepts the other's `start`.

The spec's "Short Authentication String (SAS) verification": after `start`, we choose the
methods (`curve25519-hkdf-sha256`, `sha256`, `hkdf-hmac-sha256.v2`, emoji and decimal) and
commit to our ephemeral key; both keys are exchanged; both people compare the emoji (or
numbers); each side then MACs the long-term keys it vouches for, and checks the other's.
The Curve25519 exchange, the HKDF and the HMACs are vodozemac's (matrix-nio's own crypto
library), the commitment a SHA-256 over the start's canonical JSON (`canonicaljson`), in
unpadded base64 (`unpaddedbase64`): nothing here is hand-made crypto or encoding, only the
spec's strings and choices. Pure: messages in, content dicts out, no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import vodozemac
from canonicaljson import encode_canonical_json
from unpaddedbase64 import encode_base64

SAS_V1 = "m.sas.v1"
KEY_AGREEMENT = "curve25519-hkdf-sha256"
HASH = "sha256"
MAC_METHOD = "hkdf-hmac-sha256.v2"
SAS_METHODS = ("decimal", "emoji")
# The spec's table (data-definitions/sas-emoji.json): 64 emoji with their English names, as
# Element shows them (matrix-nio's copy is older: "Wrench", "Thumbs up", "Airplane").
EMOJI: tuple[tuple[str, str], ...] = (
    ("🐶", "Dog"),
    ("🐱", "Cat"),
    ("🦁", "Lion"),
    ("🐎", "Horse"),
    ("🦄", "Unicorn"),
    ("🐷", "Pig"),
    ("🐘", "Elephant"),
    ("🐰", "Rabbit"),
    ("🐼", "Panda"),
    ("🐓", "Rooster"),
    ("🐧", "Penguin"),
    ("🐢", "Turtle"),
    ("🐟", "Fish"),
    ("🐙", "Octopus"),
    ("🦋", "Butterfly"),
    ("🌷", "Flower"),
    ("🌳", "Tree"),
    ("🌵", "Cactus"),
    ("🍄", "Mushroom"),
    ("🌏", "Globe"),
    ("🌙", "Moon"),
    ("☁️", "Cloud"),
    ("🔥", "Fire"),
    ("🍌", "Banana"),
    ("🍎", "Apple"),
    ("🍓", "Strawberry"),
    ("🌽", "Corn"),
    ("🍕", "Pizza"),
    ("🎂", "Cake"),
    ("❤️", "Heart"),
    ("😀", "Smiley"),
    ("🤖", "Robot"),
    ("🎩", "Hat"),
    ("👓", "Glasses"),
    ("🔧", "Spanner"),
    ("🎅", "Santa"),
    ("👍", "Thumbs Up"),
    ("☂️", "Umbrella"),
    ("⌛", "Hourglass"),
    ("⏰", "Clock"),
    ("🎁", "Gift"),
    ("💡", "Light Bulb"),
    ("📕", "Book"),
    ("✏️", "Pencil"),
    ("📎", "Paperclip"),
    ("✂️", "Scissors"),
    ("🔒", "Lock"),
    ("🔑", "Key"),
    ("🔨", "Hammer"),
    ("☎️", "Telephone"),
    ("🏁", "Flag"),
    ("🚂", "Train"),
    ("🚲", "Bicycle"),
    ("✈️", "Aeroplane"),
    ("🚀", "Rocket"),
    ("🏆", "Trophy"),
    ("⚽", "Ball"),
    ("🎸", "Guitar"),
    ("🎺", "Trumpet"),
    ("🔔", "Bell"),
    ("⚓", "Anchor"),
    ("🎧", "Headphones"),
    ("📁", "Folder"),
    ("📌", "Pin"),
)


class SasError(Exception):
    """The exchange cannot go on: `code` is the spec's cancel code for it."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Party:
    user_id: str
    device_id: str


def _pick(offered: Any, wanted: str, what: str) -> str:
    if not isinstance(offered, list) or wanted not in offered:
        raise SasError("m.unknown_method", f"no common {what} (we need {wanted})")
    return wanted


@dataclass(slots=True)
class SasExchange:
    """Our side of one exchange. `flow_id` is the transaction id (to-device) or the id of
    the request event (in a room); `start` is the other side's start content as received."""

    own: Party
    their: Party
    flow_id: str
    start: Mapping[str, Any]
    sas_methods: list[str] = field(default_factory=list)
    _sas: vodozemac.Sas = field(default_factory=vodozemac.Sas)
    _established: vodozemac.EstablishedSas | None = None
    _their_key: str = ""
    _canonical_start: bytes = b""

    def __post_init__(self) -> None:
        if self.start.get("method") != SAS_V1:
            raise SasError("m.unknown_method", "only m.sas.v1 is supported")
        _pick(self.start.get("key_agreement_protocols"), KEY_AGREEMENT, "key agreement")
        _pick(self.start.get("hashes"), HASH, "hash")
        _pick(self.start.get("message_authentication_codes"), MAC_METHOD, "MAC method")
        offered = self.start.get("short_authentication_string")
        common = [m for m in SAS_METHODS if isinstance(offered, list) and m in offered]
        if "decimal" not in common:
            raise SasError("m.unknown_method", "the decimal SAS is required")
        self.sas_methods = common
        try:  # what the commitment covers; NaN, infinities and lone surrogates have none
            self._canonical_start = encode_canonical_json(self.start)
        except (ValueError, TypeError):
            raise SasError("m.invalid_message", "the start is no canonical JSON") from None

    @property
    def own_key(self) -> str:
        return str(self._sas.public_key.to_base64())

    def accept_content(self) -> dict[str, Any]:
        """Our `m.key.verification.accept` (without the flow's relation/transaction id)."""
        commitment = hashlib.sha256(self.own_key.encode() + self._canonical_start)
        return {
            "method": SAS_V1,
            "key_agreement_protocol": KEY_AGREEMENT,
            "hash": HASH,
            "message_authentication_code": MAC_METHOD,
            "short_authentication_string": self.sas_methods,
            "commitment": encode_base64(commitment.digest()),
        }

    def receive_key(self, content: Mapping[str, Any]) -> dict[str, Any]:
        """Take their ephemeral key; return our `m.key.verification.key` content."""
        if self._established is not None:
            raise SasError("m.unexpected_message", "a second key")
        key = content.get("key")
        if not isinstance(key, str):
            raise SasError("m.invalid_message", "the key is missing")
        try:
            their = vodozemac.Curve25519PublicKey.from_base64(key)
            self._established = self._sas.diffie_hellman(their)
        except (vodozemac.KeyException, vodozemac.SasException, ValueError) as exc:
            raise SasError("m.invalid_message", f"bad key: {exc}") from None
        self._their_key = key
        return {"key": self.own_key}

    def _sas_info(self) -> str:
        # The starter (they) first, then the accepter (we); then the flow id.
        their, own = self.their, self.own
        return (
            f"MATRIX_KEY_VERIFICATION_SAS|{their.user_id}|{their.device_id}|{self._their_key}"
            f"|{own.user_id}|{own.device_id}|{self.own_key}|{self.flow_id}"
        )

    def _established_sas(self) -> vodozemac.EstablishedSas:
        if self._established is None:
            raise SasError("m.unexpected_message", "no keys exchanged yet")
        return self._established

    @property
    def keys_exchanged(self) -> bool:
        return self._established is not None

    def emoji(self) -> list[tuple[str, str]]:
        indices = self._established_sas().bytes(self._sas_info()).emoji_indices
        return [EMOJI[i] for i in indices]

    def decimals(self) -> tuple[int, int, int]:
        first, second, third = self._established_sas().bytes(self._sas_info()).decimals
        return (first, second, third)

    def _mac_base(self, sender: Party, receiver: Party) -> str:
        return (
            f"MATRIX_KEY_VERIFICATION_MAC{sender.user_id}{sender.device_id}"
            f"{receiver.user_id}{receiver.device_id}{self.flow_id}"
        )

    def mac_content(self, keys: Mapping[str, str]) -> dict[str, Any]:
        """Our `m.key.verification.mac`: `keys` maps key ids (`ed25519:ID`) to public keys."""
        sas = self._established_sas()
        base = self._mac_base(self.own, self.their)
        macs = {key_id: sas.calculate_mac(key, base + key_id) for key_id, key in keys.items()}
        key_ids = ",".join(sorted(keys))
        return {"mac": macs, "keys": sas.calculate_mac(key_ids, base + "KEY_IDS")}

    def check_mac(self, content: Mapping[str, Any], known: Mapping[str, str]) -> list[str]:
        """The key ids their MAC vouches for that we know (`known`: id -> public key); raise
        `SasError` (m.key_mismatch) when a MAC is wrong or no known key is covered."""
        sas = self._established_sas()
        macs = content.get("mac")
        keys_mac = content.get("keys")
        if not isinstance(macs, Mapping) or not isinstance(keys_mac, str):
            raise SasError("m.invalid_message", "the MAC content is malformed")
        base = self._mac_base(self.their, self.own)
        try:
            sas.verify_mac(",".join(sorted(macs)), base + "KEY_IDS", keys_mac)
        except vodozemac.SasException:
            raise SasError("m.key_mismatch", "the MAC of the key list does not match") from None
        verified = []
        for key_id, mac in macs.items():
            key = known.get(key_id)
            if key is None:
                continue  # a key we do not know of them: not vouched for, not refused
            if not isinstance(mac, str):
                raise SasError("m.invalid_message", "a MAC is not a string")
            try:
                sas.verify_mac(key, base + key_id, mac)
            except vodozemac.SasException:
                raise SasError("m.key_mismatch", f"the MAC of {key_id} does not match") from None
            verified.append(key_id)
        if not verified:
            raise SasError("m.key_mismatch", "their MAC covers none of their keys we know")
        return verified
