"""The `[limits]` section: what squidd may spend per day.

Caps are per local day (midnight in `timezone`); unset means no cap. A turn whose scope
(the daemon, its session, the heartbeat, cron) already used its cap today is refused with
a fixed reply and no model call; the owner is told once a day on `notify_target`.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from squidd.config._base import Section
from squidd.config.checks import check_target, check_timezone


class LimitsSettings(Section):
    daily_tokens: int | None = Field(default=None, gt=0)
    session_daily_tokens: int | None = Field(default=None, gt=0)
    daily_cost: float | None = Field(default=None, gt=0)
    heartbeat_daily_tokens: int | None = Field(default=None, gt=0)
    cron_daily_tokens: int | None = Field(default=None, gt=0)
    timezone: str = "UTC"
    notify_target: str = ""
    refusal_text: str = (
        "My daily budget is used up; I will answer again after midnight. (The owner has been told.)"
    )

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        return check_timezone(value)

    @field_validator("notify_target")
    @classmethod
    def _target(cls, value: str) -> str:
        return check_target(value)

    @field_validator("refusal_text")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value
