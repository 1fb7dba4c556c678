"""Unpadded base64 and canonical JSON are the libraries' (`unpaddedbase64`, `canonicaljson`):
the spec's appendix examples, and where squidd wraps them (the lenient-but-strict base64
reader of keys and signatures, the bytes a signature covers) the wrapper gives the library's
answer on any input."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from canonicaljson import encode_canonical_json
from hypothesis import given, settings
from hypothesis import strategies as st
from unpaddedbase64 import decode_base64, encode_base64

from squidd.channels.matrix.identity.signed_json import SigningKey, b64decode, canonical_bytes

# The spec's appendix, "Unpadded Base64".
SPEC_BASE64 = [
    (b"", ""),
    (b"f", "Zg"),
    (b"fo", "Zm8"),
    (b"foo", "Zm9v"),
    (b"foob", "Zm9vYg"),
    (b"fooba", "Zm9vYmE"),
    (b"foobar", "Zm9vYmFy"),
]

# The spec's appendix, "Canonical JSON" examples (all but the one with a float exponent:
# Matrix content carries integers, and Python reads 1e10 as a float).
SPEC_CANONICAL = [
    ("{}", "{}"),
    ('{"one": 1, "two": "Two"}', '{"one":1,"two":"Two"}'),
    ('{"b": "2", "a": "1"}', '{"a":"1","b":"2"}'),
    ('{"b":"2","a":"1"}', '{"a":"1","b":"2"}'),
    (
        '{"auth": {"success": true, "mxid": "@john.doe:example.com", "profile": '
        '{"display_name": "John Doe", "three_pids": [{"medium": "email", "address": '
        '"john.doe@example.org"}, {"medium": "msisdn", "address": "123456789"}]}}}',
        '{"auth":{"mxid":"@john.doe:example.com","profile":{"display_name":"John Doe",'
        '"three_pids":[{"address":"john.doe@example.org","medium":"email"},'
        '{"address":"123456789","medium":"msisdn"}]},"success":true}}',
    ),
    ('{"a": "日本語"}', '{"a":"日本語"}'),
    ('{"本": 2, "日": 1}', '{"日":1,"本":2}'),
    ('{"a": "\\u65E5"}', '{"a":"日"}'),
    ('{"a": null}', '{"a":null}'),
    ('{"a": -0}', '{"a":0}'),
]

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(exclude_categories=["Cs"])), inner, max_size=4)
    ),
    max_leaves=16,
)


@pytest.mark.parametrize(("raw", "text"), SPEC_BASE64)
def test_unpadded_base64_matches_the_spec_examples(raw: bytes, text: str) -> None:
    assert encode_base64(raw) == text
    assert b64decode(text) == raw


def test_keys_and_signatures_are_written_in_unpadded_base64() -> None:
    key = SigningKey(bytes(range(32)))
    signature = key.sign_bytes(b"data")
    for written in (key.public, signature):
        assert "=" not in written
        assert b64decode(written) == decode_base64(written)
    assert key.public == encode_base64(base64.b64decode(key.public + "="))


@settings(max_examples=300)
@given(raw=st.binary(max_size=80), urlsafe=st.booleans(), padded=st.booleans())
def test_every_base64_spelling_of_bytes_reads_back(raw: bytes, urlsafe: bool, padded: bool) -> None:
    text = encode_base64(raw, urlsafe=urlsafe)
    if padded:
        text += "=" * (-len(text) % 4)
    assert b64decode(text) == raw == decode_base64(text)
    assert b64decode(f" {text}\n") == raw  # whitespace around it is no part of it


@settings(max_examples=1000)
@given(text=st.one_of(st.text(alphabet="AZaz09+/-_= \n!é", max_size=14), st.text(max_size=10)))
def test_the_base64_reader_gives_the_librarys_answer_or_refuses(text: str) -> None:
    try:
        ours = b64decode(text)
    except ValueError:
        # Refused: a character outside both alphabets, or a length no encoding has.
        stripped = text.strip()
        outside = set(stripped) - set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_="
        )
        data = stripped.rstrip("=")
        assert outside or len(data) % 4 == 1 or "=" in data or _bad_padding(stripped)
        return
    assert ours == decode_base64(text.strip())


def _bad_padding(text: str) -> bool:
    data = text.rstrip("=")
    padding = len(text) - len(data)
    return (len(data) % 4 == 0 and not data and padding > 0) or (
        len(data) % 4 in (2, 3) and padding > 4 - len(data) % 4
    )


def test_a_non_string_is_no_base64() -> None:
    with pytest.raises(ValueError, match="not a base64 string"):
        b64decode(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("given_json", "canonical"), SPEC_CANONICAL)
def test_canonical_json_matches_the_spec_examples(given_json: str, canonical: str) -> None:
    assert canonical_bytes(json.loads(given_json)) == canonical.encode("utf-8")


@settings(max_examples=300)
@given(obj=st.dictionaries(st.text(), _JSON, max_size=5), extra=_JSON)
def test_the_signed_bytes_are_the_librarys_canonical_json(obj: dict[str, Any], extra: Any) -> None:
    signed = {**obj, "signatures": {"@a:b": {"ed25519:X": "sig"}}, "unsigned": extra}
    stripped = {k: v for k, v in obj.items() if k not in ("signatures", "unsigned")}
    assert canonical_bytes(signed) == encode_canonical_json(stripped)
    # The spec's rules spelled out for float-free content: the same bytes.
    spelled = json.dumps(stripped, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert canonical_bytes(signed) == spelled.encode("utf-8")
