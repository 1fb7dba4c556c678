"""Cross-signing keys: the three Ed25519 keys of an account, and the checks of their chain.

An account's identity is its master key. The master key signs the self-signing key (which
signs the account's own devices) and the user-signing key (which signs other people's
master keys). A device is "cross-signed" when the self-signing key that its owner's master
key signed has signed that device's keys (spec: "Cross-signing"). Everything here is pure:
bodies to upload, and checks of what `/keys/query` returned, with our own verifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from squidd.channels.matrix.identity.signed_json import SigningKey, verify

MASTER = "master"
SELF_SIGNING = "self_signing"
USER_SIGNING = "user_signing"
# The secret names under which secret storage keeps the three private keys.
SECRET_NAMES = {
    MASTER: "m.cross_signing.master",
    SELF_SIGNING: "m.cross_signing.self_signing",
    USER_SIGNING: "m.cross_signing.user_signing",
}


def fingerprint(public_key: str) -> str:
    """A public key in groups of four, the way clients show keys to compare."""
    return " ".join(public_key[i : i + 4] for i in range(0, len(public_key), 4))


@dataclass(frozen=True, slots=True)
class CrossSigningKeys:
    """The private half of an account's identity."""

    master: SigningKey
    self_signing: SigningKey
    user_signing: SigningKey

    @classmethod
    def generate(cls) -> CrossSigningKeys:
        return cls(SigningKey.generate(), SigningKey.generate(), SigningKey.generate())

    @classmethod
    def from_seeds(cls, seeds: Mapping[str, bytes]) -> CrossSigningKeys:
        return cls(
            SigningKey(seeds[MASTER]),
            SigningKey(seeds[SELF_SIGNING]),
            SigningKey(seeds[USER_SIGNING]),
        )

    def seeds(self) -> dict[str, bytes]:
        return {
            MASTER: self.master.seed,
            SELF_SIGNING: self.self_signing.seed,
            USER_SIGNING: self.user_signing.seed,
        }

    def upload_body(self, user_id: str) -> dict[str, Any]:
        """The body of `/keys/device_signing/upload` (without `auth`)."""
        master = _key_object(user_id, MASTER, self.master)
        return {
            "master_key": master,
            "self_signing_key": self.master.sign(
                _key_object(user_id, SELF_SIGNING, self.self_signing), user_id
            ),
            "user_signing_key": self.master.sign(
                _key_object(user_id, USER_SIGNING, self.user_signing), user_id
            ),
        }

    def sign_device(self, user_id: str, device_keys: Mapping[str, Any]) -> dict[str, Any]:
        """The device's keys as `/keys/signatures/upload` wants them: only our signature."""
        bare = {k: v for k, v in device_keys.items() if k not in ("signatures", "unsigned")}
        return self.self_signing.sign(bare, user_id)

    def sign_master_key(self, user_id: str, master_key: Mapping[str, Any]) -> dict[str, Any]:
        """Another person's master key signed with our user-signing key."""
        bare = {k: v for k, v in master_key.items() if k not in ("signatures", "unsigned")}
        return self.user_signing.sign(bare, user_id)


def _key_object(user_id: str, usage: str, key: SigningKey) -> dict[str, Any]:
    return {"user_id": user_id, "usage": [usage], "keys": {key.key_id: key.public}}


# --- what the server says about an account --------------------------------------------------


@dataclass(frozen=True, slots=True)
class PublicIdentity:
    """An account's published identity: its master key and (if validly signed by the master
    key) its self-signing key, each an unpadded base64 Ed25519 public key."""

    user_id: str
    master: str
    self_signing: str | None


def _single_key(obj: Any, user_id: str, usage: str) -> str | None:
    if not isinstance(obj, Mapping) or obj.get("user_id") != user_id:
        return None
    usages = obj.get("usage")
    if not isinstance(usages, list) or usage not in usages:
        return None
    keys = obj.get("keys")
    if not isinstance(keys, Mapping) or len(keys) != 1:
        return None
    ((key_id, public),) = keys.items()
    if not isinstance(public, str) or key_id != f"ed25519:{public}":
        return None
    return public


def public_identity(query: Mapping[str, Any], user_id: str) -> PublicIdentity | None:
    """The identity of `user_id` in a `/keys/query` answer, or None if it has none."""
    masters = query.get("master_keys")
    master_obj = masters.get(user_id) if isinstance(masters, Mapping) else None
    master = _single_key(master_obj, user_id, MASTER)
    if master is None:
        return None
    ssks = query.get("self_signing_keys")
    ssk_obj = ssks.get(user_id) if isinstance(ssks, Mapping) else None
    ssk = _single_key(ssk_obj, user_id, SELF_SIGNING)
    if ssk is not None and not (
        isinstance(ssk_obj, Mapping) and verify(ssk_obj, user_id, f"ed25519:{master}", master)
    ):
        ssk = None
    return PublicIdentity(user_id, master, ssk)


def device_keys(query: Mapping[str, Any], user_id: str, device_id: str) -> Mapping[str, Any] | None:
    devices = query.get("device_keys")
    per_user = devices.get(user_id) if isinstance(devices, Mapping) else None
    found = per_user.get(device_id) if isinstance(per_user, Mapping) else None
    return found if isinstance(found, Mapping) else None


def device_ed25519(keys: Mapping[str, Any]) -> str | None:
    device_id = keys.get("device_id")
    published = keys.get("keys")
    if not isinstance(device_id, str) or not isinstance(published, Mapping):
        return None
    value = published.get(f"ed25519:{device_id}")
    return value if isinstance(value, str) else None


def device_cross_signed(identity: PublicIdentity, keys: Mapping[str, Any], device_id: str) -> bool:
    """Whether the device's keys (self-signed, for this user and device id) carry a valid
    signature of the identity's self-signing key."""
    user_id = identity.user_id
    if identity.self_signing is None:
        return False
    if keys.get("user_id") != user_id or keys.get("device_id") != device_id:
        return False
    own = device_ed25519(keys)
    if own is None or not verify(keys, user_id, f"ed25519:{device_id}", own):
        return False
    ssk = identity.self_signing
    return verify(keys, user_id, f"ed25519:{ssk}", ssk)
