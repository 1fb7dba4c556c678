"""The `[backup]` section: backups the daemon makes on its own, and how many it keeps.

Off by default (`every = ""`). `squidd backup create` works whatever is set here.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator

from squidd.config._base import Section

_EVERY = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class BackupSettings(Section):
    every: str = ""
    """How often the daemon writes a backup: `6h`, `1d`, `1w`; empty: never on its own."""
    keep: int = Field(default=7, ge=1, le=10_000)
    """The newest this many scheduled backups are kept; older ones are removed."""
    dir: Path | None = None
    """Where scheduled backups go; empty: `<data dir>/backups`."""
    include_secrets: bool = False
    """Also archive the Matrix credentials, cross-signing keys and crypto store."""

    @field_validator("every")
    @classmethod
    def _interval(cls, value: str) -> str:
        if value.strip() and _EVERY.match(value) is None:
            raise ValueError(f"{value!r} must look like 30m, 6h, 1d or 1w (or be empty)")
        if value.strip() and cls.seconds_of(value) < 60:
            raise ValueError("backups at most once a minute")
        return value.strip()

    @staticmethod
    def seconds_of(value: str) -> float:
        match = _EVERY.match(value)
        return 0.0 if match is None else float(int(match.group(1)) * _UNIT_S[match.group(2)])

    @property
    def every_s(self) -> float | None:
        """The interval in seconds, None when scheduled backups are off."""
        return self.seconds_of(self.every) if self.every else None
