"""Encrypted attachments (the spec's `v2` format) made and read chunk by chunk: what squidd
encrypts, nio's own `decrypt_attachment` opens to the same bytes with the hash it names;
what nio encrypts, squidd's streaming decryption opens, refusing a wrong hash, malformed
keys and a counter that would run over; a 20 MB file is encrypted from disk without ever
being held in memory."""

from __future__ import annotations

import hashlib
import itertools
import os
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nio.crypto.attachments import decrypt_attachment, encrypt_attachment
from unpaddedbase64 import decode_base64, encode_base64

from squidd.channels.matrix import upload
from squidd.channels.matrix.attachments import (
    AttachmentError,
    AttachmentKey,
    Encryptor,
    decrypt,
)

pytestmark = pytest.mark.anyio

MB = 1024 * 1024


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


async def feed(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def gathered(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in chunks])


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(0, 600), max_size=8))
def test_what_we_encrypt_in_chunks_nio_decrypts(data: bytes, cuts: list[int]) -> None:
    encryptor = Encryptor(AttachmentKey.fresh())
    ciphertext = b"".join(encryptor.update(chunk) for chunk in split(data, cuts))
    info = encryptor.file_info()
    assert encryptor.length == len(ciphertext) == len(data)
    assert info["hashes"]["sha256"] == encode_base64(hashlib.sha256(ciphertext).digest())
    plain = decrypt_attachment(ciphertext, info["key"]["k"], info["hashes"]["sha256"], info["iv"])
    assert plain == data


def test_the_file_info_is_the_specs_v2_format() -> None:
    info = Encryptor(AttachmentKey.fresh()).file_info()
    assert set(info) == {"v", "key", "iv", "hashes"} and info["v"] == "v2"
    key = info["key"]
    assert {k: key[k] for k in ("kty", "alg", "ext", "key_ops")} == {
        "kty": "oct",
        "alg": "A256CTR",
        "ext": True,
        "key_ops": ["encrypt", "decrypt"],
    }
    # k is URL-safe unpadded base64 of 32 bytes; iv and hash standard unpadded base64.
    assert not set(key["k"]) & set("+/=") and len(decode_base64(key["k"])) == 32
    iv = decode_base64(info["iv"])
    assert len(iv) == 16 and iv[8:] == bytes(8)  # the counter half starts at zero
    assert "=" not in info["iv"] + info["hashes"]["sha256"]
    assert info["hashes"]["sha256"] == encode_base64(hashlib.sha256(b"").digest())
    assert Encryptor(AttachmentKey.fresh()).file_info()["key"]["k"] != key["k"]


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(0, 600), max_size=8))
async def test_what_nio_encrypts_we_decrypt_in_chunks(data: bytes, cuts: list[int]) -> None:
    ciphertext, keys = encrypt_attachment(data)
    assert await gathered(decrypt(feed(split(ciphertext, cuts)), keys)) == data


async def test_a_wrong_hash_lets_no_last_chunk_through() -> None:
    ciphertext, keys = encrypt_attachment(os.urandom(5000))
    tampered = bytes([ciphertext[0] ^ 1]) + ciphertext[1:]
    out: list[bytes] = []
    with pytest.raises(AttachmentError, match="does not match its hash"):
        async for chunk in decrypt(feed(split(tampered, [1000, 2000, 3000])), keys):
            out.append(chunk)
    assert sum(map(len, out)) < 5000


@pytest.mark.parametrize(
    "damage",
    [
        {"key": None},
        {"hashes": "x"},
        {"iv": 5},
        {"iv": "AAAA"},  # 3 bytes, no IV
        {"iv": "é"},
        {"key": {"k": encode_base64(bytes(16), urlsafe=True)}},
    ],
)
async def test_malformed_encryption_info_is_refused(damage: dict[str, Any]) -> None:
    _, keys = encrypt_attachment(b"data")
    with pytest.raises(AttachmentError, match="malformed encryption info"):
        await gathered(decrypt(feed([b"x"]), {**keys, **damage}))


async def test_a_counter_that_would_run_over_is_refused() -> None:
    key = AttachmentKey(bytes(32), bytes(8) + b"\xff" * 8)  # one block left before it wraps
    encryptor = Encryptor(AttachmentKey(bytes(32), bytes(16)))
    info = {**encryptor.file_info(), "iv": encode_base64(key.iv)}
    fits = Encryptor(key)
    one_block = fits.update(bytes(16))
    assert await gathered(decrypt(feed([one_block]), {**info, **_hashes(one_block)})) == bytes(16)
    with pytest.raises(AttachmentError, match="overruns its counter"):
        await gathered(decrypt(feed([bytes(17)]), {**info, **_hashes(bytes(17))}))


def _hashes(ciphertext: bytes) -> dict[str, Any]:
    return {"hashes": {"sha256": encode_base64(hashlib.sha256(ciphertext).digest())}}


async def test_a_20_mb_file_is_encrypted_from_disk_in_chunks(tmp_path: Path) -> None:
    size = 20 * MB
    source, sent = tmp_path / "big.bin", tmp_path / "sent.bin"
    with source.open("wb") as handle:
        for _ in range(20):
            handle.write(os.urandom(MB))
    warm = tmp_path / "warm.bin"  # first use imports modules: not what is measured
    warm.write_bytes(b"w")
    async with await anyio.open_file(warm, "rb") as opened:
        await gathered(upload._chunks(opened, 1, upload._Pass(Encryptor(AttachmentKey.fresh()))))
    run = upload._Pass(Encryptor(AttachmentKey.fresh()))
    tracemalloc.start()
    try:
        async with await anyio.open_file(source, "rb") as opened:
            with sent.open("wb") as body:  # the request body, as aiohttp writes it out
                async for chunk in upload._chunks(opened, size, run):
                    body.write(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The old way held the file and its ciphertext (2 x 20 MB); chunks need well under 1 MB.
    assert peak < 2 * MB, f"peak {peak} bytes while encrypting {size}"
    assert run.encryptor.length == size and not run.shrank
    info = run.encryptor.file_info()
    ciphertext = sent.read_bytes()
    assert info["hashes"]["sha256"] == encode_base64(hashlib.sha256(ciphertext).digest())
    plain = decrypt_attachment(ciphertext, info["key"]["k"], info["hashes"]["sha256"], info["iv"])
    assert hashlib.sha256(plain).digest() == hashlib.sha256(source.read_bytes()).digest()


async def test_a_file_that_shrinks_while_read_is_no_short_body(tmp_path: Path) -> None:
    source = tmp_path / "shrinking.bin"
    source.write_bytes(os.urandom(100_000))
    run = upload._Pass(Encryptor(AttachmentKey.fresh()))
    async with await anyio.open_file(source, "rb") as opened:
        with pytest.raises(ConnectionError, match=r"shrinking\.bin"):
            await gathered(upload._chunks(opened, 200_000, run))
    assert run.shrank and run.encryptor.length == 100_000


async def test_only_the_size_announced_is_read_from_a_growing_file(tmp_path: Path) -> None:
    source = tmp_path / "growing.bin"
    source.write_bytes(os.urandom(150_000))
    run = upload._Pass(Encryptor(AttachmentKey.fresh()))
    async with await anyio.open_file(source, "rb") as opened:
        ciphertext = await gathered(upload._chunks(opened, 100_000, run))
    info = run.encryptor.file_info()
    plain = decrypt_attachment(ciphertext, info["key"]["k"], info["hashes"]["sha256"], info["iv"])
    assert plain == source.read_bytes()[:100_000]
