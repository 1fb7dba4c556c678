"""Trimming a reply to what its sender wrote now: quoted history and signatures dropped.

Recognises `>` quotes with their attribution line ("On ... wrote:", in a few languages),
"Original Message" separators, Outlook's rule-and-From block, the RFC 3676 signature
delimiter and a trailing mobile signature. Forwarded content is kept.
"""

from __future__ import annotations

import re

__all__ = ["trim_reply"]

_ATTRIBUTION_RE = re.compile(
    r"^(on\b.{0,300}\bwrote:|am\b.{0,300}\bschrieb.{0,80}:|le\b.{0,300}\ba écrit\s*:"
    r"|el\b.{0,300}\bescribió:|.{0,300}\bwrote:)\s*$",
    re.IGNORECASE,
)
_ORIGINAL_RE = re.compile(
    r"^\s*-{2,}\s*(original message|ursprüngliche nachricht|message d'origine)\s*-{2,}\s*$",
    re.IGNORECASE,
)
_OUTLOOK_RULE_RE = re.compile(r"^\s*_{10,}\s*$")
_OUTLOOK_FROM_RE = re.compile(r"^\s*\**(from|von|de):\**\s", re.IGNORECASE)
_MOBILE_SIG_RE = re.compile(r"^\s*(sent from my \w+|get outlook for \w+)", re.IGNORECASE)


def _next_nonblank(lines: list[str], start: int) -> str:
    """The first line from `start` on that is not blank, stripped; '' if none."""
    for index in range(start, len(lines)):
        stripped = lines[index].strip()
        if stripped:
            return stripped
    return ""


def trim_reply(text: str) -> str:
    """Drop quoted history and the signature; keep the text the sender wrote now.

    Forwarded content is kept (the user may want it read). When trimming would leave
    nothing, the text is returned as it was.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if line in ("-- ", "--"):
            break  # RFC 3676 signature delimiter
        if _ORIGINAL_RE.match(line):
            break
        if _OUTLOOK_RULE_RE.match(line) and any(
            _OUTLOOK_FROM_RE.match(following) for following in lines[index + 1 : index + 3]
        ):
            break
        if stripped.startswith(">"):
            continue
        if _ATTRIBUTION_RE.match(stripped):
            # Only the next non-blank line matters; scanning all the rest for every such
            # line made a long mail of them quadratic (the receive loop stalled on it).
            following = _next_nonblank(lines, index + 1)
            if not following or following.startswith(">"):
                continue
        kept.append(line.rstrip())
    while kept and not kept[-1].strip():
        kept.pop()
    if kept and _MOBILE_SIG_RE.match(kept[-1]):
        kept.pop()
    result = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return result or text.strip()
