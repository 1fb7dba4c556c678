"""Configuration of attachments: the media store (`[media]`) and voice notes (`[transcription]`).

`[media]` bounds what is downloaded and kept (size cap, lifetime), what is handed to the
model (image size, extracted text) and how large a file the assistant may send.
`[transcription]` names an OpenAI-compatible `/v1/audio/transcriptions` endpoint (e.g. a
local whisper server); without a base_url, voice notes are not transcribed and the
assistant is told so.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator

from squidd.config._base import Endpoint, Section


class MediaSettings(Section):
    """Files that come with messages: how large, how long kept, how much reaches the model."""

    max_download_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    """Over it a file is not downloaded; the assistant gets its name, type and size."""
    lifetime_hours: float = Field(default=72.0, gt=0)
    """Media older than this is removed by the daemon."""
    sweep_interval_s: float = Field(default=3600.0, gt=0)
    image_max_px: int = Field(default=1568, ge=64, le=8192)
    """Longest side of an image sent to the model (re-encoded, EXIF dropped)."""
    text_max_chars: int = Field(default=20_000, gt=0)
    """Text extracted from a text file or a PDF, at most."""
    max_send_bytes: int = Field(default=25 * 1024 * 1024, gt=0, le=1024 * 1024 * 1024)
    """Largest file the assistant may send with a reply (`send_file`); the channels' own
    limits (the homeserver's upload size, the mail's attachment cap) apply on top."""


class TranscriptionSettings(Endpoint):
    """An OpenAI-compatible speech-to-text endpoint for voice notes."""

    credential_prefix: ClassVar[str] = "transcription"

    base_url: str = ""
    """Empty: voice notes are not transcribed."""
    model: str = "whisper-1"
    language: str = ""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if value and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must be empty or an http:// or https:// URL")
        return value.rstrip("/")
