"""Cron jobs and the heartbeat: when to run a prompt, and handing it to the router.

APScheduler 3.x triggers only compute fire times here (cron expressions, intervals, one
time, each in an IANA timezone); the loop, the persistence of jobs and the missed-run
policy are ours. A job's next fire time is persisted, so runs missed while the daemon was
down are recognised at start: run once if within the grace window, skipped with a log line
otherwise. The clock is a parameter, so tests move time instead of waiting for it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from typing import Any, Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
import structlog
from anyio.abc import TaskStatus
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from squidd.core.ports import ChannelState
from squidd.core.supervisor import ChildHealth
from squidd.errors import StorageError

log = structlog.get_logger()

ScheduleKind = Literal["cron", "every", "at"]
HEARTBEAT_OK = "HEARTBEAT_OK"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_EVERY_RE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MIN_INTERVAL = timedelta(minutes=1)


# --- clocks ----------------------------------------------------------------------------------


class Clock(Protocol):
    """Wall-clock time for schedules. `sleep_until` returns once `now() >= when`."""

    def now(self) -> datetime: ...

    async def sleep_until(self, when: datetime) -> None: ...


class SystemClock:
    """The real clock; sleeps in slices so a wall-clock jump (suspend, NTP) is noticed."""

    def __init__(self, max_slice_s: float = 30.0) -> None:
        self._max_slice_s = max_slice_s

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime) -> None:
        while True:
            delta = (when - self.now()).total_seconds()
            if delta <= 0:
                return
            await anyio.sleep(min(delta, self._max_slice_s))


# --- jobs ------------------------------------------------------------------------------------


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

    @property
    def session_id(self) -> str:
        return f"cron:{self.name}"

    def trigger(self) -> Any:
        return build_trigger(self.kind, self.spec, self.timezone, self.created_at)

    def describe(self) -> str:
        when = {"cron": "cron", "every": "every", "at": "at"}[self.kind]
        return f"{when} {self.spec} ({self.timezone})"

    def to_dict(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.astimezone(UTC).isoformat()

        return {
            "name": self.name,
            "prompt": self.prompt,
            "kind": self.kind,
            "spec": self.spec,
            "timezone": self.timezone,
            "target": self.target,
            "created_at": iso(self.created_at),
            "created_by": self.created_by,
            "next_run": iso(self.next_run),
            "last_run": iso(self.last_run),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CronJob:
        def when(key: str) -> datetime | None:
            value = data.get(key)
            return None if value is None else _aware(datetime.fromisoformat(str(value)))

        kind = str(data["kind"])
        if kind not in ("cron", "every", "at"):
            raise ValueError(f"unknown schedule kind {kind!r}")
        created = when("created_at")
        if created is None:
            raise ValueError("created_at is missing")
        return cls(
            name=str(data["name"]),
            prompt=str(data["prompt"]),
            kind=kind,  # type: ignore[arg-type]  # checked just above
            spec=str(data["spec"]),
            timezone=str(data["timezone"]),
            target=str(data.get("target") or ""),
            created_at=created,
            created_by=str(data.get("created_by") or ""),
            next_run=when("next_run"),
            last_run=when("last_run"),
        )


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _next_run_key(job: CronJob) -> datetime:
    return job.next_run or datetime.max.replace(tzinfo=UTC)


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


class JobStore(Protocol):
    """Where the jobs live (the daemon, the agent tools and `squidd cron` share it)."""

    async def load(self) -> list[CronJob]:
        """All jobs; raises StorageError if the file is unreadable (never rewritten then)."""
        ...

    async def modify(self, change: Callable[[list[CronJob]], list[CronJob]]) -> list[CronJob]:
        """Read, change and write back atomically under a lock; returns the new list."""
        ...

    async def version(self) -> object:
        """Changes whenever the stored jobs changed (cheap; checked every poll)."""
        ...


FireFn = Callable[[CronJob, datetime], Awaitable[None]]


class CronScheduler:
    """Fires due jobs through `fire` (which queues the run in the router)."""

    def __init__(
        self,
        store: JobStore,
        fire: FireFn,
        *,
        clock: Clock,
        misfire_grace: timedelta,
        poll_s: float = 5.0,
    ) -> None:
        self._store = store
        self._fire = fire
        self._clock = clock
        self._grace = misfire_grace
        self._poll_s = poll_s
        self._wake = anyio.Event()
        self._jobs: list[CronJob] = []
        self._broken: str | None = None

    def notify_changed(self) -> None:
        """Look at the jobs again now (a tool just changed them)."""
        self._wake.set()

    def next_runs(self) -> list[dict[str, str | None]]:
        return [
            {
                "name": job.name,
                "schedule": job.describe(),
                "next_run": job.next_run.isoformat() if job.next_run else None,
                "target": job.target,
            }
            for job in sorted(self._jobs, key=_next_run_key)
        ]

    async def run(
        self, health: ChildHealth, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        seen_version: object = None
        while True:
            version = await self._store.version()
            if version != seen_version:
                await self._reload(health)
                seen_version = version
            if self._broken is None:
                await self.tick()
            due = min((j.next_run for j in self._jobs if j.next_run), default=None)
            if self._broken is None and due is not None and due <= self._clock.now():
                continue
            await self._sleep(due)

    async def _reload(self, health: ChildHealth) -> None:
        try:
            self._jobs = await self._store.load()
        except StorageError as exc:
            if self._broken != str(exc):
                log.error("cron_jobs_unreadable", reason=str(exc))  # noqa: TRY400 - expected; the reason is enough
            self._broken = str(exc)
            health.set(ChannelState.FAILED, f"jobs file unreadable, not touched: {exc}")
            return
        if self._broken is not None:
            log.info("cron_jobs_readable_again")
        self._broken = None
        health.set(ChannelState.CONNECTED, f"{len(self._jobs)} job(s)")

    async def _sleep(self, due: datetime | None) -> None:
        wake = self._wake = anyio.Event()

        async def until_due() -> None:
            if due is None:
                await anyio.sleep_forever()
            else:
                await self._clock.sleep_until(due)
            wake.set()

        with anyio.move_on_after(self._poll_s):
            async with anyio.create_task_group() as tg:
                tg.start_soon(until_due)
                await wake.wait()
                tg.cancel_scope.cancel()

    async def tick(self) -> None:
        """Fire (or skip, if missed for too long) every due job, and persist what happened."""
        now = self._clock.now()
        due = [j for j in self._jobs if j.next_run is not None and j.next_run <= now]
        if not due:
            return
        outcomes: dict[str, tuple[datetime | None, datetime | None]] = {}
        parked: set[str] = set()
        for job in due:
            scheduled = job.next_run
            if scheduled is None:
                continue
            try:
                following = following_run(job, max(now, scheduled))
            except ValueError as exc:
                # E.g. a timezone this machine no longer knows: one bad job must not stop
                # the others (nor run again and again); it stays listed, without a next run.
                log.error("cron_job_invalid", job=job.name, reason=str(exc), effect="parked")  # noqa: TRY400 - expected; the reason is enough
                parked.add(job.name)
                continue
            late = now - scheduled
            last = job.last_run
            with structlog.contextvars.bound_contextvars(job=job.name):
                if late > self._grace:
                    log.warning(
                        "cron_run_missed",
                        job=job.name,
                        scheduled=scheduled.isoformat(),
                        late_s=int(late.total_seconds()),
                        reason="the daemon was not running; outside the grace window",
                    )
                else:
                    log.info("cron_run", job=job.name, scheduled=scheduled.isoformat())
                    await self._fire(job, scheduled)
                    last = now
            outcomes[job.name] = (following, last)

        def apply(jobs: list[CronJob]) -> list[CronJob]:
            result = []
            for job in jobs:
                if job.name in parked:
                    job = replace(job, next_run=None)
                elif job.name in outcomes:
                    nxt, last = outcomes[job.name]
                    if nxt is None:
                        log.info("cron_job_finished", job=job.name)
                        continue
                    job = replace(job, next_run=nxt, last_run=last)
                result.append(job)
            return result

        try:
            self._jobs = await self._store.modify(apply)
        except StorageError as exc:
            # Keep going from memory; the file is reported and left alone.
            log.error("cron_jobs_not_saved", reason=str(exc))  # noqa: TRY400 - expected; the reason is enough
            self._jobs = apply(self._jobs)


# --- heartbeat -------------------------------------------------------------------------------

_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[(?P<mark>[ xX])\]\s*)?(?P<text>.*)$")


def has_open_items(checklist: str) -> bool:
    """True when the checklist has a list item that is neither ticked (`- [x]`) nor empty.

    Headings, prose and HTML comments are not items: a checklist of only those (the
    default file) costs no model call.
    """
    text = re.sub(r"<!--.*?-->", "", checklist, flags=re.DOTALL)
    for line in text.splitlines():
        match = _ITEM_RE.match(line)
        if not match:
            continue
        if (match.group("mark") or " ").lower() == "x":
            continue
        if match.group("text").strip():
            return True
    return False


def parse_active_hours(text: str) -> tuple[dtime, dtime]:
    start, end = text.split("-")

    def clock_time(value: str) -> dtime:
        hours, minutes = (int(part) for part in value.split(":"))
        if hours == 24:
            return dtime.max if minutes == 0 else dtime(23, 59)
        return dtime(hours, minutes)

    return clock_time(start), clock_time(end)


def within_hours(local: dtime, hours: tuple[dtime, dtime]) -> bool:
    start, end = hours
    if start == end:
        return True
    if start < end:
        return start <= local < end
    return local >= start or local < end  # e.g. 22:00-06:00 spans midnight


HEARTBEAT_PROMPT = (
    "This is a scheduled heartbeat, not a message from your owner. Go through the checklist "
    "from HEARTBEAT.md below and act on what needs attention now. If nothing needs your "
    "owner's attention, reply with exactly {ok} and nothing else.\n\n{checklist}"
)


class Heartbeat:
    """Every interval, inside active hours, runs the workspace checklist through the agent."""

    def __init__(
        self,
        *,
        interval: timedelta,
        active_hours: tuple[dtime, dtime],
        timezone: str,
        read_checklist: Callable[[], Awaitable[str]],
        fire: Callable[[str, datetime], Awaitable[None]],
        clock: Clock,
    ) -> None:
        self._interval = interval
        self._hours = active_hours
        self._tz = ZoneInfo(timezone)
        self._read = read_checklist
        self._fire = fire
        self._clock = clock
        self.next_beat: datetime | None = None

    async def run(
        self, health: ChildHealth, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        self.next_beat = self._clock.now() + self._interval
        while True:
            await self._clock.sleep_until(self.next_beat)
            when = self.next_beat
            await self.beat(when)
            # Beats missed while asleep (a suspend) are not caught up, not even one more: the
            # next comes a full interval after now, else the owner hears the same news twice.
            following = when + self._interval
            now = self._clock.now()
            self.next_beat = following if following > now else now + self._interval

    async def beat(self, when: datetime) -> bool:
        """One heartbeat; True when it asked the agent."""
        local = when.astimezone(self._tz).time()
        if not within_hours(local, self._hours):
            log.debug("heartbeat_skipped", reason="outside active hours")
            return False
        checklist = await self._read()
        if not has_open_items(checklist):
            log.info("heartbeat_skipped", reason="no open items in HEARTBEAT.md")
            return False
        log.info("heartbeat_run")
        await self._fire(HEARTBEAT_PROMPT.format(ok=HEARTBEAT_OK, checklist=checklist), when)
        return True
