"""Voice notes out: what a Matrix voice note needs to know of an Ogg/Opus file, and the
text a speech endpoint is given.

`read_ogg_opus` checks that bytes are one Ogg/Opus stream (RFC 3533 pages, each page's
CRC, RFC 7845's `OpusHead` then `OpusTags` headers, one logical stream) and reads what the
voice note's event claims: the duration (the last granule position less the pre-skip, in
48 kHz samples) and a coarse waveform (the audio packets' bytes per sample over time, each
packet's length from its TOC byte: Opus spends fewer bits on quiet frames, so the bars
follow the loudness roughly), scaled to 0..1024 as Element draws it.
Anything else — an MP3, an error page, a truncated file — is a `SpeechError` that says what
was wrong, never a voice note with a made-up duration.

`spoken_parts` turns a written answer into what is read aloud (markdown marks and link
targets dropped) in parts of at most the endpoint's input limit, cut at paragraphs, then
sentences, then words.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass

from squidd.errors import SpeechError

__all__ = ["WAVEFORM_POINTS", "VoiceAudio", "read_ogg_opus", "spoken_parts", "spoken_text"]

WAVEFORM_POINTS = 64
"""Samples of a voice note's waveform (Element draws about this many bars)."""
WAVEFORM_MAX = 1024
OPUS_RATE = 48_000  # Opus granule positions count 48 kHz samples, whatever the input rate

_PAGE_HEADER = struct.Struct("<4sBBqIII B")
_BOS, _EOS = 0x02, 0x04


@dataclass(frozen=True, slots=True)
class VoiceAudio:
    """What a voice note's event says of its Ogg/Opus file."""

    duration_ms: int
    waveform: tuple[int, ...]
    channels: int


@dataclass(frozen=True, slots=True)
class _Page:
    flags: int
    granule: int
    serial: int
    packets: bytes  # the page's body (segments concatenated)
    lacing: bytes  # the segment table: a value under 255 ends a packet


# Ogg's CRC-32 is zlib's polynomial unreflected, with no initial or final xor: zlib's own
# (C) CRC over the bytes bit-reversed, bit-reversed back, gives it (a Python loop over the
# bytes took 160 ms for a minute of audio; this, about 2 ms).
_REVERSED = bytes(int(f"{byte:08b}"[::-1], 2) for byte in range(256))


def _ogg_crc(data: bytes) -> int:
    """Ogg's CRC-32 (polynomial 0x04c11db7, not reflected, no initial or final xor)."""
    raw = zlib.crc32(data.translate(_REVERSED), 0xFFFFFFFF) ^ 0xFFFFFFFF
    return int(f"{raw:032b}"[::-1], 2)


def _pages(data: bytes) -> list[_Page]:
    """Every page of `data`, checked: capture pattern, version, CRC, body length."""
    pages: list[_Page] = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < _PAGE_HEADER.size:
            raise SpeechError(f"not Ogg/Opus: a page header is cut short at byte {offset}")
        magic, version, flags, granule, serial, _seq, crc, count = _PAGE_HEADER.unpack_from(
            data, offset
        )
        if magic != b"OggS" or version != 0:
            raise SpeechError(f"not Ogg/Opus: no Ogg page at byte {offset}")
        table_end = offset + _PAGE_HEADER.size + count
        body_end = table_end + sum(data[offset + _PAGE_HEADER.size : table_end])
        if table_end > len(data) or body_end > len(data):
            raise SpeechError(f"not Ogg/Opus: the page at byte {offset} is cut short")
        page = bytearray(data[offset:body_end])
        page[22:26] = b"\0\0\0\0"
        if _ogg_crc(bytes(page)) != crc:
            raise SpeechError(f"not Ogg/Opus: the page at byte {offset} fails its checksum")
        lacing = data[offset + _PAGE_HEADER.size : table_end]
        pages.append(_Page(flags, granule, serial, data[table_end:body_end], lacing))
        offset = body_end
    return pages


def _packets(pages: list[_Page]) -> list[bytes]:
    """The stream's packets, joined across pages by their lacing values."""
    packets: list[bytes] = []
    current = bytearray()
    for page in pages:
        at = 0
        for value in page.lacing:
            current += page.packets[at : at + value]
            at += value
            if value < 255:
                packets.append(bytes(current))
                current.clear()
    return packets


def _samples(packet: bytes) -> int:
    """An Opus packet's length in 48 kHz samples, from its TOC byte (RFC 6716, 3.1)."""
    if not packet:
        return 0
    config, code = packet[0] >> 3, packet[0] & 0x03
    if config < 12:
        frame = (480, 960, 1920, 2880)[config % 4]  # SILK: 10, 20, 40, 60 ms
    elif config < 16:
        frame = (480, 960)[config % 2]  # hybrid: 10, 20 ms
    else:
        frame = (120, 240, 480, 960)[config % 4]  # CELT: 2.5, 5, 10, 20 ms
    if code == 0:
        return frame
    if code in (1, 2):
        return 2 * frame
    return frame * (packet[1] & 0x3F) if len(packet) > 1 else 0


def read_ogg_opus(data: bytes) -> VoiceAudio:
    """The duration and waveform of one Ogg/Opus stream; `SpeechError` when it is not one."""
    if not data.startswith(b"OggS"):
        kind = "nothing" if not data else f"{len(data)} bytes that are not Ogg"
        raise SpeechError(f"the speech endpoint answered {kind}, not Ogg/Opus")
    pages = _pages(data)
    head = pages[0]
    if not head.flags & _BOS or not head.packets.startswith(b"OpusHead") or len(pages) < 2:
        raise SpeechError("not Ogg/Opus: the stream does not start with an Opus header")
    if len(head.packets) < 19 or head.packets[8] >> 4 != 0:
        raise SpeechError("not Ogg/Opus: an Opus header of an unknown version")
    channels = head.packets[9]
    (pre_skip,) = struct.unpack_from("<H", head.packets, 10)
    if not pages[1].packets.startswith(b"OpusTags"):
        raise SpeechError("not Ogg/Opus: the Opus comment header is missing")
    if any(page.serial != head.serial for page in pages):
        raise SpeechError("not Ogg/Opus: more than one logical stream")
    audio = [page for page in pages[1:] if page.granule >= 0]
    end = max((page.granule for page in audio), default=0)
    samples = end - pre_skip
    if samples <= 0 or channels == 0:
        raise SpeechError("not Ogg/Opus: the stream holds no audio")
    return VoiceAudio(
        duration_ms=samples * 1000 // OPUS_RATE,
        waveform=_waveform(pages),
        channels=channels,
    )


def _waveform(pages: list[_Page]) -> tuple[int, ...]:
    """Bytes per sample of the audio packets (Opus spends fewer on quiet frames) over time,
    in `WAVEFORM_POINTS` bars of equal length, scaled to 0..1024."""
    timed = [(len(p), n) for p in _packets(pages)[2:] if (n := _samples(p)) > 0]
    total = sum(n for _, n in timed)
    if not total:
        return (0,) * WAVEFORM_POINTS
    sums = [0.0] * WAVEFORM_POINTS
    lengths = [0] * WAVEFORM_POINTS
    start = 0
    for size, samples in timed:
        bar = min(WAVEFORM_POINTS - 1, (start + samples // 2) * WAVEFORM_POINTS // total)
        sums[bar] += size
        lengths[bar] += samples
        start += samples
    bars = [sums[i] / lengths[i] if lengths[i] else 0.0 for i in range(WAVEFORM_POINTS)]
    for i in range(1, WAVEFORM_POINTS):  # a bar no packet fell in shows its neighbour
        if not lengths[i]:
            bars[i] = bars[i - 1]
    top = max(bars)
    return tuple(round(WAVEFORM_MAX * bar / top) if top else 0 for bar in bars)


_CODE_FENCE = re.compile(r"^\s*```.*$", re.MULTILINE)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKS = re.compile(r"(\*\*|__|\*|`|~~)")
_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6}|>|[-*+][ \t])[ \t]*", re.MULTILINE)
_SENTENCE = re.compile(r"(?<=[.!?…])\s+")


def spoken_text(text: str) -> str:
    """`text` as it is read aloud: markdown marks, fences and link targets dropped."""
    text = _CODE_FENCE.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _HEADING.sub("", text)
    text = _MARKS.sub("", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def spoken_parts(text: str, limit: int) -> list[str]:
    """`spoken_text(text)` in parts of at most `limit` characters, each part as many whole
    paragraphs as fit, else whole sentences, else whole words (a longer word is cut)."""
    if limit <= 0:
        raise ValueError("limit must be positive")
    units: list[tuple[str, str]] = []  # (text, what joins it to the text before)
    for paragraph in re.split(r"\n\s*\n", spoken_text(text)):
        if paragraph.strip():
            pieces = _fitting(paragraph.strip(), limit)
            units.extend(zip(pieces, ["\n\n"] + [" "] * (len(pieces) - 1), strict=True))
    parts: list[str] = []
    for unit, joiner in units:
        if parts and len(parts[-1]) + len(joiner) + len(unit) <= limit:
            parts[-1] = f"{parts[-1]}{joiner}{unit}"
        else:
            parts.append(unit)
    return parts


def _fitting(paragraph: str, limit: int) -> list[str]:
    """A paragraph as pieces of at most `limit`: itself, its sentences, its words."""
    if len(paragraph) <= limit:
        return [paragraph]
    pieces: list[str] = []
    for sentence in _SENTENCE.split(paragraph):
        if len(sentence) <= limit:
            pieces.append(sentence)
            continue
        line = ""
        for word in sentence.split():
            while len(word) > limit:
                if line:
                    pieces.append(line)
                    line = ""
                pieces.append(word[:limit])
                word = word[limit:]
            if line and len(line) + 1 + len(word) > limit:
                pieces.append(line)
                line = ""
            line = f"{line} {word}" if line else word
        if line:
            pieces.append(line)
    return _packed(pieces, limit)


def _packed(pieces: list[str], limit: int) -> list[str]:
    packed: list[str] = []
    for piece in pieces:
        if packed and len(packed[-1]) + 1 + len(piece) <= limit:
            packed[-1] = f"{packed[-1]} {piece}"
        else:
            packed.append(piece)
    return packed
