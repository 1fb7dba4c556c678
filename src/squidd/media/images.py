"""Images for the model: decoded, bounded, re-encoded without EXIF, as a `data:` URL.

A model cannot fetch an `mxc://` URL or a local path, so images go inline. Decoding is
bounded (Pillow's decompression-bomb limit), the longest side is cut to `max_px`, the
orientation from EXIF is applied and then all metadata (EXIF, GPS, ICC comments) dropped:
only the pixels are re-encoded, JPEG for photos, PNG for images with transparency.
Pillow is imported with the first image, not at start-up: a daemon that never sees one
never loads it.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

MAX_IMAGE_PIXELS = 64_000_000  # beyond this Pillow refuses: a decompression bomb


class ImageError(ValueError):
    """The file is not an image Pillow can decode safely."""


def image_data_url(path: Path, *, max_px: int) -> str:
    """The image at `path` as a bounded, metadata-free `data:image/...;base64,` URL."""
    from PIL import Image, ImageOps

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with Image.open(path) as opened:
            opened.seek(0)  # first frame of an animation
            image = ImageOps.exif_transpose(opened)
            image.thumbnail((max_px, max_px))
            alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
            clean = image.convert("RGBA" if alpha else "RGB")
    except (OSError, Image.DecompressionBombError, ValueError, EOFError) as exc:
        raise ImageError(f"not a readable image: {type(exc).__name__}") from exc
    out = io.BytesIO()
    if alpha:
        clean.save(out, format="PNG", optimize=True)
        mime = "image/png"
    else:
        clean.save(out, format="JPEG", quality=85)
        mime = "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(out.getvalue()).decode('ascii')}"
