"""The attachment reader: images to bounded EXIF-free data URLs, PDF and text extraction,
references for the rest, the notes for files not kept, voice notes with and without a
transcriber."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from squidd.config.media import MediaSettings
from squidd.core.models import Attachment
from squidd.errors import TranscriptionError
from squidd.media.reader import MediaReader
from tests.support.media_files import jpeg_with_exif, pdf_with_text, wav_tone

pytestmark = pytest.mark.anyio


def stored(
    tmp_path: Path, name: str, data: bytes, kind: str = "file", mime: str = ""
) -> Attachment:
    path = tmp_path / name
    path.write_bytes(data)
    return Attachment(kind, name, mime, len(data), "0" * 64, str(path))  # type: ignore[arg-type]


def reader(vision: bool = True, transcriber: object = None, **media: int) -> MediaReader:
    return MediaReader(MediaSettings(**media), vision=vision, transcriber=transcriber)  # type: ignore[arg-type]


async def test_an_image_becomes_a_bounded_data_url_without_exif(tmp_path: Path) -> None:
    att = stored(tmp_path, "photo.jpg", jpeg_with_exif(), "image", "image/jpeg")
    content = await reader(image_max_px=512).read([att])
    assert len(content.images) == 1
    url = content.images[0]
    assert url.startswith("data:image/jpeg;base64,")
    decoded = base64.b64decode(url.split(",", 1)[1])
    image = Image.open(io.BytesIO(decoded))
    assert max(image.size) == 512
    assert not image.getexif() and b"SecretCam" not in decoded
    assert "[image: photo.jpg]" in content.text
    assert "data:" not in content.kept and str(att.path) in content.kept


async def test_without_vision_the_image_is_a_reference(tmp_path: Path) -> None:
    att = stored(tmp_path, "photo.jpg", jpeg_with_exif(64, 64), "image", "image/jpeg")
    content = await reader(vision=False).read([att])
    assert content.images == ()
    assert "does not see images" in content.text and str(att.path) in content.text


async def test_pdf_text_is_extracted_for_this_turn_only(tmp_path: Path) -> None:
    att = stored(
        tmp_path,
        "r.pdf",
        pdf_with_text("Invoice 4711 total 99 EUR", "page two"),
        mime="application/pdf",
    )
    content = await reader().read([att])
    assert "Invoice 4711 total 99 EUR" in content.text and "page two" in content.text
    assert "Invoice" not in content.kept and "[file: r.pdf]" in content.kept


async def test_text_is_cut_at_the_cap(tmp_path: Path) -> None:
    att = stored(tmp_path, "notes.md", b"a" * 500, mime="text/markdown")
    content = await reader(text_max_chars=100).read([att])
    assert "a" * 100 in content.text and "a" * 101 not in content.text
    assert "cut at 100 characters" in content.text


async def test_a_broken_pdf_or_image_is_said_not_raised(tmp_path: Path) -> None:
    pdf = stored(tmp_path, "bad.pdf", b"%PDF-1.4 garbage", mime="application/pdf")
    png = stored(tmp_path, "bad.png", b"not a png", "image", "image/png")
    content = await reader().read([pdf, png])
    assert "cannot read the PDF" in content.text and "not a readable image" in content.text


async def test_other_files_are_references_to_the_stored_file(tmp_path: Path) -> None:
    att = stored(tmp_path, "a.bin", b"\x00\x01", mime="application/octet-stream")
    content = await reader().read([att])
    assert str(att.path) in content.text and content.images == ()


async def test_a_file_not_kept_is_named_with_why(tmp_path: Path) -> None:
    big = Attachment("file", "huge.zip", "application/zip", 99_000_000, note="too large")
    gone = Attachment("image", "old.png", "image/png", 10, "0" * 64, str(tmp_path / "gone"))
    content = await reader().read([big, gone])
    assert "[file: huge.zip] (application/zip, 99000000 bytes): too large" in content.text
    assert "no longer kept" in content.text and content.kept == content.text


class Scripted:
    def __init__(self, result: str | Exception) -> None:
        self.result = result
        self.calls: list[tuple[Path, str]] = []

    async def transcribe(self, path: Path, mime: str) -> str:
        self.calls.append((path, mime))
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


async def test_a_voice_note_is_its_transcript_marked_as_such(tmp_path: Path) -> None:
    att = stored(tmp_path, "voice.ogg", wav_tone(), "audio", "audio/ogg")
    transcriber = Scripted("buy milk please")
    content = await reader(transcriber=transcriber).read([att])
    assert content.text == "[voice note, transcribed]: buy milk please" == content.kept
    assert transcriber.calls == [(Path(str(att.path)), "audio/ogg")]


async def test_a_failed_transcription_is_told(tmp_path: Path) -> None:
    att = stored(tmp_path, "voice.ogg", wav_tone(), "audio", "audio/ogg")
    failing = Scripted(TranscriptionError("endpoint answered 500"))
    content = await reader(transcriber=failing).read([att])
    assert "could not be transcribed (endpoint answered 500)" in content.text
    assert "could not be transcribed" in (await reader().read([att])).text
