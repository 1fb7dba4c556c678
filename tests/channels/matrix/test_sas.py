"""The SAS exchange on the accepting side against a starter played here with vodozemac's
primitives: the commitment, the same emoji and numbers on both sides, MACs that check out,
and each way it must refuse (methods we do not speak, a wrong MAC, a MAC of no known key)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
import vodozemac
from canonicaljson import encode_canonical_json
from hypothesis import given, settings
from hypothesis import strategies as st
from unpaddedbase64 import encode_base64

from squidd.channels.matrix.verification.sas import EMOJI, Party, SasError, SasExchange

BOT = Party("@bot:example.org", "BOTDEVICE")
ALICE = Party("@alice:example.org", "ALICEDEV")
FLOW = "$request-event-id"


def start_content(**overrides: Any) -> dict[str, Any]:
    content = {
        "from_device": ALICE.device_id,
        "method": "m.sas.v1",
        "key_agreement_protocols": ["curve25519-hkdf-sha256", "curve25519"],
        "hashes": ["sha256"],
        "message_authentication_codes": ["hkdf-hmac-sha256.v2", "hkdf-hmac-sha256"],
        "short_authentication_string": ["decimal", "emoji"],
        "m.relates_to": {"rel_type": "m.reference", "event_id": FLOW},
    }
    content.update(overrides)
    return content


class Starter:
    """Alice's side, written from the spec with vodozemac."""

    def __init__(self, start: dict[str, Any]) -> None:
        self.start = start
        self.sas = vodozemac.Sas()
        self.key = self.sas.public_key.to_base64()
        self.established: vodozemac.EstablishedSas | None = None
        self.bot_key = ""

    def take_key(self, accept: dict[str, Any], bot_key: str) -> None:
        commitment = hashlib.sha256(bot_key.encode() + encode_canonical_json(self.start))
        assert accept["commitment"] == encode_base64(commitment.digest())
        self.bot_key = bot_key
        self.established = self.sas.diffie_hellman(
            vodozemac.Curve25519PublicKey.from_base64(bot_key)
        )

    def info(self) -> str:
        return (
            f"MATRIX_KEY_VERIFICATION_SAS|{ALICE.user_id}|{ALICE.device_id}|{self.key}"
            f"|{BOT.user_id}|{BOT.device_id}|{self.bot_key}|{FLOW}"
        )

    def mac(self, keys: dict[str, str]) -> dict[str, Any]:
        assert self.established is not None
        base = f"MATRIX_KEY_VERIFICATION_MAC{ALICE.user_id}{ALICE.device_id}"
        base += f"{BOT.user_id}{BOT.device_id}{FLOW}"
        return {
            "mac": {k: self.established.calculate_mac(v, base + k) for k, v in keys.items()},
            "keys": self.established.calculate_mac(",".join(sorted(keys)), base + "KEY_IDS"),
        }

    def check(self, content: dict[str, Any], keys: dict[str, str]) -> None:
        assert self.established is not None
        base = f"MATRIX_KEY_VERIFICATION_MAC{BOT.user_id}{BOT.device_id}"
        base += f"{ALICE.user_id}{ALICE.device_id}{FLOW}"
        self.established.verify_mac(",".join(sorted(keys)), base + "KEY_IDS", content["keys"])
        for key_id, key in keys.items():
            self.established.verify_mac(key, base + key_id, content["mac"][key_id])


def exchanged() -> tuple[SasExchange, Starter]:
    alice = Starter(start_content())
    bot = SasExchange(BOT, ALICE, FLOW, alice.start)
    accept = bot.accept_content()
    assert accept["message_authentication_code"] == "hkdf-hmac-sha256.v2"
    assert accept["key_agreement_protocol"] == "curve25519-hkdf-sha256"
    ours = bot.receive_key({"key": alice.key})
    alice.take_key(accept, ours["key"])
    return bot, alice


def test_both_sides_show_the_same_emoji_and_numbers() -> None:
    bot, alice = exchanged()
    assert alice.established is not None
    their = alice.established.bytes(alice.info())
    assert bot.emoji() == [EMOJI[i] for i in their.emoji_indices]
    assert bot.decimals() == tuple(their.decimals)
    assert len(EMOJI) == 64 and EMOJI[34] == ("🔧", "Spanner")


def test_macs_check_out_both_ways() -> None:
    bot, alice = exchanged()
    own = {"ed25519:BOTDEVICE": "bot-device-key", "ed25519:MASTER": "MASTER"}
    alice.check(bot.mac_content(own), own)
    theirs = {"ed25519:ALICEDEV": "alice-device-key", "ed25519:ALICEMASTER": "ALICEMASTER"}
    known = {"ed25519:ALICEDEV": "alice-device-key"}  # her master key unknown to the bot
    assert bot.check_mac(alice.mac(theirs), known) == ["ed25519:ALICEDEV"]


def test_a_mac_over_another_key_is_a_key_mismatch() -> None:
    bot, alice = exchanged()
    forged = alice.mac({"ed25519:ALICEDEV": "a-key-of-mallory"})
    with pytest.raises(SasError) as caught:
        bot.check_mac(forged, {"ed25519:ALICEDEV": "alice-device-key"})
    assert caught.value.code == "m.key_mismatch"


def test_a_mac_of_no_known_key_is_refused() -> None:
    bot, alice = exchanged()
    with pytest.raises(SasError) as caught:
        bot.check_mac(alice.mac({"ed25519:OTHER": "k"}), {"ed25519:ALICEDEV": "alice-key"})
    assert caught.value.code == "m.key_mismatch"


@pytest.mark.parametrize(
    "override",
    [
        {"method": "m.reciprocate.v1"},
        {"key_agreement_protocols": ["curve25519"]},
        {"message_authentication_codes": ["hkdf-hmac-sha256"]},
        {"hashes": ["sha512"]},
        {"short_authentication_string": ["emoji"]},
        {"hashes": "sha256"},
    ],
)
def test_methods_we_do_not_speak_are_refused(override: dict[str, Any]) -> None:
    with pytest.raises(SasError) as caught:
        SasExchange(BOT, ALICE, FLOW, start_content(**override))
    assert caught.value.code == "m.unknown_method"


def test_a_bad_or_second_key_is_refused() -> None:
    bot = SasExchange(BOT, ALICE, FLOW, start_content())
    with pytest.raises(SasError):
        bot.receive_key({"key": "not base64 at all!"})
    with pytest.raises(SasError):
        bot.emoji()
    bot.receive_key({"key": vodozemac.Sas().public_key.to_base64()})
    with pytest.raises(SasError) as caught:
        bot.receive_key({"key": vodozemac.Sas().public_key.to_base64()})
    assert caught.value.code == "m.unexpected_message"


@pytest.mark.parametrize(
    "override",
    [{"extra": float("nan")}, {"extra": float("inf")}, {"extra": "\ud800"}, {"\udfff": 1}],
    ids=["nan", "infinity", "lone-surrogate-value", "lone-surrogate-key"],
)
def test_a_start_with_no_canonical_json_is_an_invalid_message(override: dict[str, Any]) -> None:
    # json.loads lets all of these through from the wire; none has canonical JSON.
    with pytest.raises(SasError) as caught:
        SasExchange(BOT, ALICE, FLOW, start_content(**override))
    assert caught.value.code == "m.invalid_message"


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(extra=st.dictionaries(st.text(), _JSON, max_size=4))
def test_the_commitment_covers_the_canonical_json_of_any_start(extra: dict[str, Any]) -> None:
    start = {**extra, **start_content()}
    bot = SasExchange(BOT, ALICE, FLOW, start)
    commitment = bot.accept_content()["commitment"]
    digest = hashlib.sha256(bot.own_key.encode() + encode_canonical_json(start)).digest()
    assert commitment == encode_base64(digest)
    # The spec's canonical JSON of float-free content, spelled out: the same bytes.
    spelled = json.dumps(start, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    by_hand = base64.b64encode(hashlib.sha256((bot.own_key + spelled).encode()).digest())
    assert commitment == by_hand.decode().rstrip("=")
