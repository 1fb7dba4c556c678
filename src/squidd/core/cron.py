"""Cron jobs: what a scheduled prompt is and when it fires next.

APScheduler 3.x triggers only compute fire times here (cron expressions, intervals, one
time, each in an IANA timezone); the loop that fires jobs is `squidd.core.scheduler` and
the jobs file is `squidd.store.cron_jobs`. Crontab weekdays keep the meaning users expect
(0 or 7 = Sunday), and a job is validated with a readable reason before it is stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

ScheduleKind = Literal["cron", "every", "at"]
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_EVERY_RE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MIN_INTERVAL = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class CronJob:
    """A scheduled prompt. `target` is where the reply goes (`matrix:!room:server`,
    `email:me@example.org`, ...; empty keeps it in the job's session history only)."""

    name: str
    prompt: str
    kind: ScheduleKind
    spec: str
    timezone: str
    target: str
    created_at: datetime
    created_by: str = ""
    next_run: datetime | None = None
    last_run: datetime | None = None
    paused: bool = False
    """A paused job keeps its schedule but does not fire (the dashboard's pause)."""
    agent: str = ""
    """The agent whose job it is (its turns, memory and chain); empty: the default agent."""

    @property
    def session_id(self) -> str:
        return f"cron:{self.name}"

    def trigger(self) -> Any:
        return build_trigger(self.kind, self.spec, self.timezone, self.created_at)

    def describe(self) -> str:
        when = {"cron": "cron", "every": "every", "at": "at"}[self.kind]
        return f"{when} {self.spec} ({self.timezone})"


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def parse_interval(text: str) -> timedelta:
    """`30m`, `2h`, `1d`, `90s`, `1w` -> timedelta (at least one minute)."""
    match = _EVERY_RE.match(text)
    if not match:
        raise ValueError(f"interval {text!r} must look like 30m, 2h, 1d or 1w")
    value = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    if value < _MIN_INTERVAL:
        raise ValueError("an interval must be at least one minute")
    return value


def _weekday_field(field: str) -> str:
    """Standard crontab weekdays (0 or 7 = Sunday, names allowed) as APScheduler 3 names.

    APScheduler 3 counts 0 as Monday; expanding the field to an explicit set of day names
    keeps the crontab meaning users expect.
    """
    days: set[int] = set()

    def day(token: str) -> int:
        token = token.lower()
        if token[:3] in _WEEKDAYS and len(token) >= 3:
            return _WEEKDAYS.index(token[:3])
        number = int(token)
        if not 0 <= number <= 7:
            raise ValueError(f"weekday {token!r} is out of range 0-7")
        return number % 7

    for part in field.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError("a step must be at least 1")
        if body == "*":
            first, last = 0, 6
        elif "-" in body:
            lo, hi = body.split("-", 1)
            first, last = day(lo), day(hi)
            if hi.strip() == "7":
                last = 7
        else:
            first = last = day(body)
            if step_text:
                last = 6
        if last < first:
            raise ValueError(f"weekday range {body!r} runs backwards")
        days.update(d % 7 for d in range(first, last + 1, step))
    if len(days) == 7:
        return "*"
    return ",".join(_WEEKDAYS[d] for d in sorted(days))


def build_trigger(kind: str, spec: str, timezone: str, created_at: datetime) -> Any:
    """An APScheduler trigger for a job; ValueError with a readable reason if invalid."""
    try:
        tz = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown IANA timezone {timezone!r}") from None
    if kind == "cron":
        fields = spec.split()
        if len(fields) != 5:
            raise ValueError(
                "a cron expression has 5 fields: minute hour day-of-month month day-of-week"
            )
        minute, hour, dom, month, dow = fields
        try:
            return CronTrigger(
                minute=minute,
                hour=hour,
                day=dom,
                month=month,
                day_of_week=_weekday_field(dow),
                timezone=tz,
            )
        except (ValueError, TypeError) as exc:
            raise ValueError(f"invalid cron expression {spec!r}: {exc}") from None
    if kind == "every":
        interval = parse_interval(spec)
        return IntervalTrigger(
            seconds=int(interval.total_seconds()), start_date=created_at + interval, timezone=tz
        )
    if kind == "at":
        try:
            when = datetime.fromisoformat(spec)
        except ValueError:
            raise ValueError(f"time {spec!r} must be ISO 8601, e.g. 2026-12-24T18:00") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=tz)
        return DateTrigger(run_date=when, timezone=tz)
    raise ValueError(f"unknown schedule kind {kind!r}")


def make_job(
    name: str,
    prompt: str,
    *,
    cron: str | None = None,
    every: str | None = None,
    at: str | None = None,
    timezone: str,
    target: str,
    created_by: str = "",
    now: datetime,
    agent: str = "",
) -> CronJob:
    """Validate and build a new job (exactly one of cron/every/at)."""
    if not _NAME_RE.match(name):
        raise ValueError(
            "a job name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    if not prompt.strip():
        raise ValueError("the prompt is empty")
    given = [(k, v) for k, v in (("cron", cron), ("every", every), ("at", at)) if v]
    if len(given) != 1:
        raise ValueError("give exactly one of cron, every or at")
    kind, spec = given[0]
    if target and ":" not in target:
        raise ValueError("a target looks like 'matrix:!room:server' or 'email:me@example.org'")
    job = CronJob(
        name=name,
        prompt=prompt,
        kind=kind,  # type: ignore[arg-type]  # one of the three literals above
        spec=spec.strip(),
        timezone=timezone,
        target=target,
        created_at=now,
        created_by=created_by,
        agent=agent,
    )
    # Strictly after its creation: a job made at 08:00:00 for "0 8 * * *" starts tomorrow.
    first = job.trigger().get_next_fire_time(None, now + timedelta(microseconds=1))
    if first is None or (kind == "at" and first <= now):
        raise ValueError(f"{spec!r} is in the past")
    return replace(job, next_run=first.astimezone(UTC))


def following_run(job: CronJob, after: datetime) -> datetime | None:
    """The first fire time strictly after `after`; None when a one-shot job is done."""
    if job.kind == "at":
        return None
    nxt = job.trigger().get_next_fire_time(None, after + timedelta(microseconds=1))
    return None if nxt is None else nxt.astimezone(UTC)


class JobListError(ValueError):
    """A change to the job list that cannot be made (a taken name, an unknown job)."""


class NoSuchJob(JobListError):
    """The job list has no job of that name."""


def with_job(jobs: list[CronJob], job: CronJob) -> list[CronJob]:
    """`jobs` plus `job`; JobListError when its name is taken (names are unique)."""
    if any(existing.name == job.name for existing in jobs):
        raise JobListError(f"a job named {job.name!r} exists; remove it or pick another name")
    return [*jobs, job]


def without_job(jobs: list[CronJob], name: str) -> list[CronJob]:
    """`jobs` less the one named `name`; JobListError when there is none."""
    kept = [job for job in jobs if job.name != name]
    if len(kept) == len(jobs):
        raise NoSuchJob(f"no job named {name!r}")
    return kept
