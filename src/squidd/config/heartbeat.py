"""The `[heartbeat]` section: how often the workspace's HEARTBEAT.md checklist goes to the
agent, within which hours, and where its reply is delivered (core/heartbeat.py). An agent of
`[[agents.list]]` may set any of these keys for itself in its `heartbeat` table."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from squidd.config._base import Section
from squidd.config.checks import check_target, check_timezone

__all__ = ["HeartbeatSettings"]


class HeartbeatSettings(Section):
    enabled: bool = False
    interval_minutes: int = Field(default=30, gt=0)
    active_hours: str = "08:00-22:00"
    timezone: str = "UTC"
    target: str = ""

    @field_validator("active_hours")
    @classmethod
    def _hours(cls, value: str) -> str:
        if not re.fullmatch(r"([01]\d|2[0-4]):[0-5]\d-([01]\d|2[0-4]):[0-5]\d", value):
            raise ValueError("must look like 'HH:MM-HH:MM', e.g. '08:00-22:00'")
        return value

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        return check_timezone(value)

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        return check_target(value)
