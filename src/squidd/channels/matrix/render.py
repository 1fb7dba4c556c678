"""From the agent's markdown to Matrix message content, and from Matrix content to text.

Replies are rendered with markdown-it-py (raw HTML in the model's output is escaped, not
passed through) and then sanitised with nh3 to the tag set of the Matrix spec's
`org.matrix.custom.html`; the markdown source goes alongside as the plain `body`. Long
replies are split at paragraph, then line, then character boundaries so that every event
stays well below the homeserver's 64 KiB limit even after encryption.

Both libraries are imported at the first reply, not when the channel is built: a daemon
that has not answered yet does not hold them (docs/performance.md).
"""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

HTML_FORMAT = "org.matrix.custom.html"
# Content larger than this (JSON bytes, before encryption) is split again: base64 and the
# encryption envelope add about 40 %, and the event must stay under 65 536 bytes.
MAX_CONTENT_BYTES = 40_000

_ALLOWED_TAGS = {
    "a", "b", "blockquote", "br", "caption", "code", "del", "details", "div", "em", "font",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "s", "span",
    "strike", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr",
    "u", "ul",
}  # fmt: skip
_ALLOWED_ATTRIBUTES = {
    "a": {"href", "target"},
    "code": {"class"},
    "ol": {"start"},
    "span": {"data-mx-color", "data-mx-bg-color", "data-mx-spoiler"},
    "font": {"data-mx-color", "data-mx-bg-color", "color"},
    "th": {"align"},
    "td": {"align"},
}
_URL_SCHEMES = {"http", "https", "ftp", "mailto", "magnet", "matrix"}

_FENCE_RE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


@functools.cache
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    # commonmark plus tables and strikethrough; html=False escapes raw HTML in the input.
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
        ["table", "strikethrough"]
    )


def render_html(markdown: str) -> str:
    """Markdown to sanitised Matrix HTML."""
    html = _markdown().render(markdown)
    return sanitize_html(html).strip()


def sanitize_html(html: str) -> str:
    """Keep only what the Matrix spec allows in `formatted_body`; drop scripts and styles."""
    import nh3

    return nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel=None,
        strip_comments=True,
    )


def message_content(markdown: str, msgtype: str = "m.text") -> dict[str, Any]:
    """`m.room.message` content: plain body plus HTML when the markdown renders to more
    than a single plain paragraph."""
    content: dict[str, Any] = {"msgtype": msgtype, "body": markdown}
    html = render_html(markdown)
    plain_paragraph = f"<p>{_escape(markdown)}</p>"
    if html and html != plain_paragraph:
        content["format"] = HTML_FORMAT
        content["formatted_body"] = html
    return content


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def content_size(content: dict[str, Any]) -> int:
    return len(json.dumps(content, ensure_ascii=False).encode("utf-8"))


# --- splitting --------------------------------------------------------------------------


def split_markdown(text: str, max_bytes: int) -> list[str]:
    """Split `text` into pieces of at most `max_bytes` UTF-8 bytes.

    Paragraphs are kept whole where they fit, then lines, then characters. A code fence
    cut by a split is closed at the end of one piece and reopened at the start of the next,
    so each piece renders on its own.
    """
    if len(text.encode("utf-8")) <= max_bytes:
        return [text]
    # Leave room for a reopened/closed fence (a fence line plus newlines).
    budget = max(64, max_bytes - 32)
    pieces: list[str] = []
    current = ""
    for unit in _units(text, budget):
        candidate = unit if not current else f"{current}{unit}"
        if len(candidate.encode("utf-8")) <= budget:
            current = candidate
        else:
            if current:
                pieces.append(current)
            current = unit
    if current:
        pieces.append(current)
    return _balance_fences([p.strip("\n") for p in pieces if p.strip()])


def _units(text: str, budget: int) -> list[str]:
    """Paragraphs (with their trailing blank line), broken further when one is too big."""
    units: list[str] = []
    for para in re.split(r"(?<=\n\n)", text):
        if len(para.encode("utf-8")) <= budget:
            units.append(para)
            continue
        for line in para.splitlines(keepends=True):
            if len(line.encode("utf-8")) <= budget:
                units.append(line)
            else:
                units.extend(_hard_cut(line, budget))
    return units


def _hard_cut(line: str, budget: int) -> list[str]:
    """Cut a single over-long line at character boundaries, preferring spaces."""
    out: list[str] = []
    rest = line
    while len(rest.encode("utf-8")) > budget:
        cut = len(rest.encode("utf-8")[:budget].decode("utf-8", "ignore"))
        space = rest.rfind(" ", 0, cut)
        if space > cut // 2:
            cut = space + 1
        out.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        out.append(rest)
    return out


def _balance_fences(pieces: list[str]) -> list[str]:
    out: list[str] = []
    carry = ""  # the fence line reopened at the start of the next piece
    for piece in pieces:
        text = f"{carry}\n{piece}" if carry else piece
        carry = ""
        open_fence = ""
        for line in text.splitlines():
            match = _FENCE_RE.match(line)
            if not match:
                continue
            marker = match.group(1)
            if not open_fence:
                open_fence = line.strip()
            elif marker[0] == open_fence[0] and len(marker) >= len(_fence_marker(open_fence)):
                open_fence = ""
        if open_fence:
            text = f"{text}\n{_fence_marker(open_fence)}"
            carry = open_fence
        out.append(text)
    return out


def _fence_marker(fence_line: str) -> str:
    match = _FENCE_RE.match(fence_line)
    return match.group(1) if match else "```"


# --- inbound ----------------------------------------------------------------------------


def strip_reply_fallback(body: str) -> str:
    """Drop the `> <@user> quoted text` block clients put before a reply's own text."""
    lines = body.splitlines()
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    if index == 0:
        return body
    while index < len(lines) and not lines[index].strip():
        index += 1
    return "\n".join(lines[index:])
