"""MCP call results as the text a model reads, capped in size.

Text content is passed through; images, audio and resources are summarized (their type, MIME
type, size or URI), never inlined as base64. The whole text is capped at the server's
`max_result_chars` so one 20 MB answer cannot fill the context window or the session's
history; the cut is said in the text, so the model knows it saw only the start.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import mcp_types as types

from squidd.core.models import ToolResult
from squidd.text import clean_text

__all__ = ["render_result"]


def _describe(block: object) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        approx = len(block.data) * 3 // 4
        return f"[{kind} {block.mime_type}, about {approx} bytes, not shown]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri} ({block.mime_type or 'unknown type'})]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri}]\n{text}"
        return f"[resource {resource.uri} ({resource.mime_type or 'binary'}), not shown]"
    return f"[{type(block).__name__} content, not shown]"


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... cut: the result had {len(text)} characters, {limit} shown]"


def render_result(
    content: Sequence[object],
    structured: object,
    *,
    is_error: bool,
    max_chars: int,
) -> ToolResult:
    parts = [_describe(block) for block in content]
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = clean_text(_cap("\n".join(parts), max_chars)) if parts else "(no content)"
    return ToolResult(text, is_error=is_error)
