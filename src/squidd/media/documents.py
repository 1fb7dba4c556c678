"""Text for the model from text-like files (txt, md, csv, json, ...) and PDFs (pypdf).

Reading stops at `max_chars`: a huge file costs no more than its first part. Text files are
decoded as UTF-8 with replacement; a PDF's pages are extracted in order until the cap.
pypdf (and the Pillow it pulls in) is imported with the first PDF, not at start-up.
"""

from __future__ import annotations

import logging
from pathlib import Path

from squidd.text import clean_text

TEXT_TYPES = (
    "application/json",
    "application/xml",
    "application/x-yaml",
    "application/yaml",
    "application/csv",
)
TEXT_EXTENSIONS = (".txt", ".md", ".csv", ".json", ".xml", ".yaml", ".yml", ".log", ".tsv")

logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed PDFs warn per object


class DocumentError(ValueError):
    """The file's text cannot be extracted."""


def is_text(mime: str, path: Path) -> bool:
    return mime.startswith("text/") or mime in TEXT_TYPES or path.suffix in TEXT_EXTENSIONS


def is_pdf(mime: str, path: Path) -> bool:
    return mime == "application/pdf" or path.suffix == ".pdf"


def read_text(path: Path, *, max_chars: int) -> tuple[str, bool]:
    """The file's first `max_chars` characters, and whether it was cut."""
    with path.open("rb") as handle:
        raw = handle.read(max_chars * 4 + 4)
    text = clean_text(raw.decode("utf-8", "replace").replace("\x00", ""))
    return text[:max_chars], len(text) > max_chars or path.stat().st_size > len(raw)


def read_pdf(path: Path, *, max_chars: int) -> tuple[str, bool]:
    """The PDF's text page by page up to `max_chars`, and whether it was cut."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            reader.decrypt("")
        parts: list[str] = []
        total = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            parts.append(text)
            total += len(text)
            if total > max_chars:
                break
    except (PdfReadError, OSError, ValueError, KeyError, TypeError) as exc:
        raise DocumentError(f"cannot read the PDF: {type(exc).__name__}") from exc
    text = clean_text("\n\n".join(parts).replace("\x00", "")).strip()
    return text[:max_chars], len(text) > max_chars
