"""The `[tools]` section: which tools exist and where each may be used."""

from __future__ import annotations

from pydantic import Field

from squidd.config._base import Section


class ToolsSettings(Section):
    search_history_limit: int = Field(default=10, gt=0, le=100)
