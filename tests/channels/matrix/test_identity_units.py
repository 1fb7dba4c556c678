"""Cross-signing's pure parts against the spec's test vectors: signed JSON (the appendix's
signing key and signatures), the recovery key format and the secret storage key check
(a recovery key and key description made by another implementation), and the chain checks
of a published identity."""

from __future__ import annotations

import pytest

from squidd.channels.matrix.identity import secret_storage as ss
from squidd.channels.matrix.identity.cross_signing import (
    CrossSigningKeys,
    device_cross_signed,
    public_identity,
)
from squidd.channels.matrix.identity.signed_json import SigningKey, b64decode, verify

# The spec's appendix, "Cryptographic test vectors": signing key seed, entity "domain".
SPEC_SEED = "YJDBA9Xnr2sVqXD9Vj7XVUnmFZcZrlw8Md7kMW+3XA1"
EMPTY_SIG = "K8280/U9SSy9IVtjBuVeLr+HpOB4BQFWbg+UZaADMtTdGYI7Geitb76LTrr5QV/7Xg4ahLwYGYZzuHGZKM5ZAQ"
DATA_SIG = "KqmLSbO39/Bzb0QIYE82zqLwsA+PDzYIpIRA2sRQ4sL53+sN6/fpNSoqE7BP7vBZhG6kYdD13EIMJpvhJI+6Bw"

# A recovery key and its key description as written by another client (matrix-rust-sdk's
# tests), and a recovery key whose decoded bytes are known.
OTHER_RECOVERY_KEY = "EsTj 3yST y93F SLpB jJsz eAXc 2XzA ygD3 w69H fGaN TKBj jXEd"
OTHER_DESCRIPTION = {
    "algorithm": "m.secret_storage.v1.aes-hmac-sha2",
    "iv": "xv5b6/p3ExEw++wTyfSHEg==",
    "mac": "ujBBbXahnTAMkmPUX2/0+VTfUh63pGyVRuBcDMgmJC8=",
}
KNOWN_KEY_TEXT = "EsT           pRvZTnjck8    YrhRAtw XLS84Nr2r9S9LGAWDaExVAPBvLRK   "
KNOWN_KEY_BYTES = bytes(
    [
        *(159, 189, 70, 187, 52, 81, 113, 198, 246, 2, 44, 154, 37, 213, 104, 27),
        *(165, 78, 236, 106, 108, 73, 83, 243, 173, 192, 185, 110, 157, 145, 173, 163),
    ]
)


def test_signed_json_matches_the_spec_vectors() -> None:
    key = SigningKey(b64decode(SPEC_SEED))
    empty = key.sign({}, "domain", "ed25519:1")
    assert empty["signatures"] == {"domain": {"ed25519:1": EMPTY_SIG}}
    data = key.sign({"one": 1, "two": "Two"}, "domain", "ed25519:1")
    assert data["signatures"]["domain"]["ed25519:1"] == DATA_SIG
    assert verify(data, "domain", "ed25519:1", key.public)
    # The signature covers the content: a changed value, another key or signer all fail.
    assert not verify({**data, "two": "three"}, "domain", "ed25519:1", key.public)
    assert not verify(data, "domain", "ed25519:1", SigningKey.generate().public)
    assert not verify(data, "other", "ed25519:1", key.public)
    # `unsigned` is not covered; junk signatures are False, not exceptions.
    assert verify({**data, "unsigned": {"x": 1}}, "domain", "ed25519:1", key.public)
    junk = {"signatures": {"domain": {"ed25519:1": "!!"}}}
    assert not verify(junk, "domain", "ed25519:1", key.public)
    assert not verify({"signatures": "x"}, "domain", "ed25519:1", key.public)


def test_recovery_key_format() -> None:
    assert ss.decode_recovery_key(KNOWN_KEY_TEXT) == KNOWN_KEY_BYTES
    text = ss.encode_recovery_key(KNOWN_KEY_BYTES)
    assert text.replace(" ", "") == "".join(KNOWN_KEY_TEXT.split())
    assert all(len(group) == 4 for group in text.split(" ")[:-1])
    assert ss.decode_recovery_key(text) == KNOWN_KEY_BYTES
    with pytest.raises(ss.SecretStorageError, match="check digit"):
        ss.decode_recovery_key("EsTpRvZTnjck8YrhRAtwXLS84Nr2r9S9LGAWDaExVAPBvLRk")
    with pytest.raises(ss.SecretStorageError, match="prefix"):
        ss.decode_recovery_key("AATpRvZTnjck8YrhRAtwXLS84Nr2r9S9LGAWDaExVAPBvLRk")
    with pytest.raises(ss.SecretStorageError, match="length"):
        ss.decode_recovery_key("AATpRvZTnjck8YrhRAtwXLS84Nr2r9S9")
    with pytest.raises(ss.SecretStorageError, match="base58"):
        ss.decode_recovery_key("AATpRvZTnjck8YrhRAtwXLS84Nr0OIl")


def test_a_key_description_from_another_client_is_checked() -> None:
    key = ss.decode_recovery_key(OTHER_RECOVERY_KEY)
    assert ss.key_fits(key, OTHER_DESCRIPTION)
    assert not ss.key_fits(KNOWN_KEY_BYTES, OTHER_DESCRIPTION)
    assert not ss.key_fits(key, {**OTHER_DESCRIPTION, "algorithm": "m.other"})
    # And one of ours fits its own key only.
    description = ss.key_description(key)
    assert ss.key_fits(key, description)
    assert not ss.key_fits(KNOWN_KEY_BYTES, description)


def test_secrets_round_trip_and_refuse_a_wrong_key_or_a_changed_byte() -> None:
    key = bytes(range(32))
    box = ss.encrypt(key, "m.cross_signing.master", b"seed-in-base64")
    assert b64decode(box["iv"])[8] & 0x80 == 0  # bit 63 cleared
    assert ss.decrypt(key, "m.cross_signing.master", box) == b"seed-in-base64"
    with pytest.raises(ss.SecretStorageError, match="does not open"):
        ss.decrypt(bytes(32), "m.cross_signing.master", box)
    with pytest.raises(ss.SecretStorageError, match="does not open"):
        ss.decrypt(key, "m.cross_signing.self_signing", box)  # the name is bound in
    raw = b64decode(box["ciphertext"])
    tampered = dict(box, ciphertext=ss._b64(bytes([raw[0] ^ 1]) + raw[1:]))
    with pytest.raises(ss.SecretStorageError):
        ss.decrypt(key, "m.cross_signing.master", tampered)


USER = "@bot:example.org"


def _query(keys: CrossSigningKeys, device: SigningKey, device_id: str = "DEV") -> dict:
    body = keys.upload_body(USER)
    device_obj = device.sign(
        {
            "user_id": USER,
            "device_id": device_id,
            "algorithms": ["m.olm.v1.curve25519-aes-sha2"],
            "keys": {f"ed25519:{device_id}": device.public, f"curve25519:{device_id}": "c"},
        },
        USER,
        f"ed25519:{device_id}",
    )
    return {
        "master_keys": {USER: body["master_key"]},
        "self_signing_keys": {USER: body["self_signing_key"]},
        "device_keys": {USER: {device_id: device_obj}},
    }


def test_the_chain_master_self_signing_device_is_checked() -> None:
    keys = CrossSigningKeys.generate()
    device = SigningKey.generate()
    query = _query(keys, device)
    identity = public_identity(query, USER)
    assert identity is not None
    assert identity.master == keys.master.public
    assert identity.self_signing == keys.self_signing.public
    unsigned = query["device_keys"][USER]["DEV"]
    assert not device_cross_signed(identity, unsigned, "DEV")
    signed = keys.sign_device(USER, unsigned)
    merged = dict(unsigned)
    merged["signatures"] = {USER: {**unsigned["signatures"][USER], **signed["signatures"][USER]}}
    assert device_cross_signed(identity, merged, "DEV")
    # A device signed by someone else's self-signing key is not cross-signed.
    other = CrossSigningKeys.generate().sign_device(USER, unsigned)
    assert not device_cross_signed(identity, other, "DEV")
    # A self-signing key the master did not sign is no self-signing key.
    query["self_signing_keys"][USER] = CrossSigningKeys.generate().upload_body(USER)[
        "self_signing_key"
    ]
    broken = public_identity(query, USER)
    assert broken is not None and broken.self_signing is None
    assert not device_cross_signed(broken, merged, "DEV")
    assert public_identity({"master_keys": {USER: {"user_id": "@x:y"}}}, USER) is None
