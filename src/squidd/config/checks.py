"""Checks several config sections share: a delivery target (`<channel>:<address>`) and an
IANA timezone. Their own module, so any section (and `[[agents.list]]`'s sub-tables) may use
them without importing another section's module."""

from __future__ import annotations

import re

__all__ = ["check_target", "check_timezone"]

# "<channel>:<address>": the channel's name, then an address on it (room id, email address).
_TARGET_RE = re.compile(r"^[a-z][a-z0-9_-]*:\S")


def check_target(value: str) -> str:
    if value and not _TARGET_RE.match(value):
        raise ValueError(
            "must look like 'matrix:!room:server' or 'email:user@example.org' "
            "(a channel name, a colon, an address on that channel)"
        )
    return value


def check_timezone(value: str) -> str:
    """An IANA zone name that this machine knows."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown IANA timezone {value!r}") from None
    return value
