"""The Ogg/Opus reader (duration and waveform of real Opus, every kind of garbage refused
with a reason) and the long-answer splitting."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import soundfile
from hypothesis import given
from hypothesis import strategies as st

from squidd.errors import SpeechError
from squidd.media.voice import WAVEFORM_POINTS, _ogg_crc, read_ogg_opus, spoken_parts, spoken_text
from tests.support.media_files import wav_tone
from tests.support.speech_server import ogg_opus_tone


@pytest.mark.parametrize(("seconds", "rate"), [(0.5, 48_000), (2.75, 48_000), (1.2, 16_000)])
def test_the_duration_is_what_libsndfile_decodes(seconds: float, rate: int) -> None:
    data = ogg_opus_tone(seconds, rate=rate)
    audio = read_ogg_opus(data)
    decoded = soundfile.info(io.BytesIO(data))
    assert decoded.format == "OGG" and decoded.subtype == "OPUS"
    assert abs(audio.duration_ms - decoded.duration * 1000) <= 1
    assert abs(audio.duration_ms - seconds * 1000) <= 1
    assert audio.channels == 1


def test_the_waveform_is_low_where_the_audio_is_quiet() -> None:
    t = np.arange(96_000) / 48_000
    wave = np.where(t < 1.0, 0.5 * np.sin(2 * np.pi * 440 * t), 0.0).astype("float32")
    out = io.BytesIO()
    soundfile.write(out, wave, 48_000, format="OGG", subtype="OPUS")
    bars = read_ogg_opus(out.getvalue()).waveform
    assert len(bars) == WAVEFORM_POINTS and max(bars) == 1024 and min(bars) >= 0
    quarter = WAVEFORM_POINTS // 4
    # The tone costs Opus far more bytes than the silence (which the encoder notices a few
    # hundred ms late: the bars are coarse), and the bars show it.
    assert min(bars[:quarter]) > 4 * max(bars[-quarter // 2 :])


def _corrupt(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda ogg: b"", "answered nothing"),
        (lambda ogg: b"ID3\x04" + b"\0" * 200, "not Ogg"),
        (lambda ogg: b"<html>502 Bad Gateway</html>", "not Ogg"),
        (lambda ogg: wav_tone(), "not Ogg"),
        (lambda ogg: ogg[:-10], "cut short"),
        (lambda ogg: ogg[:30], "cut short"),
        (lambda ogg: _corrupt(ogg, 200), "checksum"),
        (lambda ogg: ogg + b"trailing junk", "not Ogg/Opus"),
    ],
)
def test_bytes_that_are_not_ogg_opus_are_refused_with_a_reason(make, reason: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpeechError, match=reason):
        read_ogg_opus(make(ogg_opus_tone(1.0)))


def test_ogg_vorbis_is_not_opus() -> None:
    out = io.BytesIO()
    soundfile.write(out, [0.0] * 4800, 48_000, format="OGG", subtype="VORBIS")
    with pytest.raises(SpeechError, match="Opus header"):
        read_ogg_opus(out.getvalue())


@given(st.binary(max_size=600))
def test_any_bytes_are_ogg_opus_or_a_speech_error(data: bytes) -> None:
    with contextlib.suppress(SpeechError):
        read_ogg_opus(b"OggS" + data)


def test_markdown_is_not_read_aloud() -> None:
    text = "## Plan\n\n- **Buy** milk\n- see [the list](https://x.example/list)\n\n```\ncode\n```"
    assert spoken_text(text) == "Plan\n\nBuy milk\nsee the list\n\ncode"


def test_a_short_answer_is_one_part() -> None:
    assert spoken_parts("Hello there. How are you?", 4096) == ["Hello there. How are you?"]


def test_a_long_answer_is_cut_at_paragraphs_then_sentences_then_words() -> None:
    para = " ".join(f"Sentence number {i} is here." for i in range(40))  # ~1100 chars
    text = "\n\n".join([para, "Short one.", para])
    parts = spoken_parts(text, 500)
    assert all(len(p) <= 500 for p in parts)
    assert all(p.endswith(".") for p in parts)  # no sentence cut in the middle
    assert " ".join(" ".join(parts).split()) == " ".join(text.split())  # nothing lost
    word = "x" * 1200
    assert [len(p) for p in spoken_parts(word, 500)] == [500, 500, 200]


@given(st.text(max_size=3000), st.integers(min_value=100, max_value=4096))
def test_parts_fit_and_keep_every_word(text: str, limit: int) -> None:
    parts = spoken_parts(text, limit)
    assert all(0 < len(p) <= limit for p in parts)
    assert "".join("".join(parts).split()) == "".join(spoken_text(text).split())


def _bitwise_ogg_crc(data: bytes) -> int:
    """Ogg's CRC-32 as RFC 3533 describes it, one bit at a time (the reference)."""
    crc = 0
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
            crc &= 0xFFFFFFFF
    return crc


@given(st.binary(max_size=300))
def test_the_page_checksum_is_ogg_crc32(data: bytes) -> None:
    assert _ogg_crc(data) == _bitwise_ogg_crc(data)
