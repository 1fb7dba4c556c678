"""Heartbeat: every interval, inside active hours, the workspace checklist goes to the agent.

A checklist without open items (only headings, prose, comments or ticked boxes) costs no
model call; so does a beat when nothing changed since the last run (the same checklist
text and no other turn since, as `activity()` counts them): the answer could only repeat.
The agent answers `HEARTBEAT_OK` when nothing needs the owner, and that reply is kept
quiet. Time-bound tasks belong in cron, which runs whether or not anything changed.
Beats missed while the machine slept are not caught up.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from datetime import time as dtime
from zoneinfo import ZoneInfo

import anyio
import structlog
from anyio.abc import TaskStatus

from squidd.core.ports import Clock
from squidd.core.supervisor import ChildHealth

log = structlog.get_logger()

HEARTBEAT_OK = "HEARTBEAT_OK"
HEARTBEAT_SESSION = "heartbeat"
"""The session every heartbeat runs in."""

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
        activity: Callable[[], int] | None = None,
    ) -> None:
        self._interval = interval
        self._hours = active_hours
        self._tz = ZoneInfo(timezone)
        self._read = read_checklist
        self._fire = fire
        self._clock = clock
        self._activity = activity
        self._last_run: tuple[str, int] | None = None
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
        seen = (checklist, self._activity() if self._activity is not None else -1)
        if self._activity is not None and seen == self._last_run:
            log.info("heartbeat_skipped", reason="nothing changed since the last run")
            return False
        self._last_run = seen
        log.info("heartbeat_run")
        await self._fire(HEARTBEAT_PROMPT.format(ok=HEARTBEAT_OK, checklist=checklist), when)
        return True
