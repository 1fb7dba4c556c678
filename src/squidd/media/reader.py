"""The attachment reader: attachment references made into what the model reads.

Images become image parts (`data:` URLs, when the model has vision), text files and PDFs
their extracted text up to a cap, voice notes their transcript (marked as such; a failure
is said plainly), and anything else a reference (its stored path and type).
A file over the cap or no longer kept is named with its type and size and why. The
history keeps the references, the notes and the transcripts; never extracted text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import structlog

from squidd.config.media import MediaSettings
from squidd.core.models import Attachment
from squidd.core.ports import AttachmentContent, Transcriber
from squidd.errors import TranscriptionError
from squidd.media.documents import DocumentError, is_pdf, is_text, read_pdf, read_text
from squidd.media.images import ImageError, image_data_url

log = structlog.get_logger(__name__)


def label(att: Attachment) -> str:
    """`[image: photo.png]`, `[voice note]`, `[file: report.pdf]`: names the attachment."""
    if att.kind == "audio":
        return f"[voice note: {att.name}]" if att.name else "[voice note]"
    return f"[{att.kind}: {att.name}]"


def _details(att: Attachment) -> str:
    return f"{att.mime or 'unknown type'}, {att.size} bytes"


class MediaReader:
    """Implements the core's `AttachmentReader` with Pillow, pypdf and a transcriber."""

    def __init__(
        self, settings: MediaSettings, *, vision: bool, transcriber: Transcriber | None
    ) -> None:
        self._settings = settings
        self._vision = vision
        self._transcriber = transcriber

    async def read(self, attachments: Sequence[Attachment]) -> AttachmentContent:
        texts: list[str] = []
        kept: list[str] = []
        images: list[str] = []
        for att in attachments:
            text, note, image = await self._one(att)
            texts.append(text)
            kept.append(note)
            if image:
                images.append(image)
        return AttachmentContent("\n\n".join(texts), "\n\n".join(kept), tuple(images))

    async def _one(self, att: Attachment) -> tuple[str, str, str]:
        """(text for the model now, note the history keeps, image data URL or "")."""
        if att.path is None:
            note = f"{label(att)} ({_details(att)}): {att.note or 'not kept'}, not downloaded"
            return note, note, ""
        path = Path(att.path)
        if not await anyio.to_thread.run_sync(path.is_file):
            note = f"{label(att)} ({_details(att)}): no longer kept"
            return note, note, ""
        ref = f"{label(att)} ({_details(att)}), saved at {path} (read-only; read_file opens it)"
        if att.kind == "audio":
            transcript = await self._transcript(att, path)
            return transcript, transcript, ""
        if att.kind == "image" or att.mime.startswith("image/"):
            return await self._image(att, path, ref)
        try:
            if is_pdf(att.mime, path):
                text, cut = await anyio.to_thread.run_sync(self._pdf, path)
            elif is_text(att.mime, path):
                text, cut = await anyio.to_thread.run_sync(self._text, path)
            else:
                return f"{ref} (its content is not shown)", ref, ""
        except (DocumentError, OSError) as exc:
            log.info("attachment_unreadable", kind=att.kind, reason=str(exc))
            return f"{ref}: {exc}", ref, ""
        more = f"\n[cut at {self._settings.text_max_chars} characters]" if cut else ""
        return f"{ref}; its text:\n<<<\n{text}\n>>>{more}", ref, ""

    def _pdf(self, path: Path) -> tuple[str, bool]:
        return read_pdf(path, max_chars=self._settings.text_max_chars)

    def _text(self, path: Path) -> tuple[str, bool]:
        return read_text(path, max_chars=self._settings.text_max_chars)

    async def _image(self, att: Attachment, path: Path, ref: str) -> tuple[str, str, str]:
        if not self._vision:
            return f"{ref} (this model does not see images)", ref, ""
        try:
            url = await anyio.to_thread.run_sync(self._data_url, path)
        except ImageError as exc:
            return f"{ref}: {exc}", ref, ""
        return f"{label(att)} (shown below)", ref, url

    def _data_url(self, path: Path) -> str:
        return image_data_url(path, max_px=self._settings.image_max_px)

    async def _transcript(self, att: Attachment, path: Path) -> str:
        if self._transcriber is None:
            return "[voice note: it could not be transcribed (no transcription configured)]"
        try:
            text = await self._transcriber.transcribe(path, att.mime)
        except TranscriptionError as exc:
            log.warning("transcription_failed", reason=str(exc))
            return f"[voice note: it could not be transcribed ({exc})]"
        return f"[voice note, transcribed]: {text.strip()}"
