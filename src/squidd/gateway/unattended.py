"""Approvals in runs no one attends: a cron job's or the heartbeat's tool call that needs an
approval (core/approvals.py) has no person to ask.

`UnattendedAsker` is the `Asker` of the pseudo-channels `cron` and `heartbeat`. A tool the
operator allowed for the run's session in `[tools.approval] unattended` (`"cron:<job name>"`
or `"heartbeat"` = a list of tools) is approved at once, by that setting (the audit log names
it); any other is denied and the model told there is no one to ask. Each denial is counted
per job: a warning in the log the first time for a job (not at each of its runs), the counts
in the status snapshot (`squidd status`, the dashboard). `squidd doctor` finds the same from
the settings, the jobs and the questions kept on disk (`unattended_problems`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from squidd.core.approvals import Answer, Choice, Question, QuestionState
from squidd.core.heartbeat import HEARTBEAT_SESSION
from squidd.core.models import Inbound

__all__ = [
    "SETTING",
    "UNATTENDED_CHANNELS",
    "UnattendedAsker",
    "denied_on_disk",
    "fix_for",
]

log = structlog.get_logger()

UNATTENDED_CHANNELS = ("cron", "heartbeat")
SETTING = "tools.approval.unattended"
_NOBODY = "nobody"


def fix_for(session: str, tools: Iterable[str]) -> str:
    """How the operator lets `tools` run in `session`'s unattended runs."""
    listed = json.dumps(sorted(set(tools)))
    return (
        f'allow them for this job in the config: [tools.approval.unattended] "{session}" = '
        f"{listed} (docs/tools.md, Approvals), or leave them out of what it is asked to do"
    )


@dataclass
class _Denied:
    tools: set[str] = field(default_factory=set)
    count: int = 0
    last: datetime | None = None

    def to_dict(self, session: str) -> dict[str, Any]:
        return {
            "session": session,
            "tools": sorted(self.tools),
            "denied": self.count,
            "last": self.last.isoformat() if self.last else None,
            "fix": fix_for(session, self.tools),
        }


class UnattendedAsker:
    """Answers the approval questions of cron and heartbeat runs (see the module)."""

    def __init__(self, allowed: Mapping[str, Sequence[str]]) -> None:
        self._allowed = {session: frozenset(tools) for session, tools in allowed.items()}
        self._denied: dict[str, _Denied] = {}

    async def ask(self, question: Question, asked_from: Inbound | None = None) -> Answer:
        if question.tool in self._allowed.get(question.session, frozenset()):
            log.info("approval_unattended_allowed", session=question.session, tool=question.tool)
            return Answer(Choice.ONCE, SETTING)
        denied = self._denied.get(question.session)
        if denied is None:
            # Once per job: its next runs are denied the same way, counted, not logged again.
            log.warning(
                "approval_denied_unattended",
                session=question.session,
                tool=question.tool,
                reason="the tool needs an approval and no one is there to give it",
                fix=fix_for(question.session, [question.tool]),
            )
            denied = self._denied[question.session] = _Denied()
        denied.tools.add(question.tool)
        denied.count += 1
        denied.last = question.asked_at
        return Answer(Choice.NO, _NOBODY)

    def snapshot(self) -> list[dict[str, Any]]:
        """The jobs with denied calls since the start: tools, count, last, the fix."""
        return [denied.to_dict(session) for session, denied in sorted(self._denied.items())]


def denied_on_disk(
    questions: Iterable[Question], allowed: Mapping[str, Sequence[str]]
) -> dict[str, list[Question]]:
    """The kept questions of unattended runs denied for want of someone to ask, per session,
    leaving out the tools the settings allow there by now."""
    found: dict[str, list[Question]] = {}
    for question in questions:
        if (
            question.channel in UNATTENDED_CHANNELS
            and question.state is QuestionState.DENIED
            and question.by == _NOBODY
            and question.tool not in allowed.get(question.session, ())
        ):
            found.setdefault(question.session, []).append(question)
    return found


def scheduled_sessions(job_names: Iterable[str], heartbeat: bool) -> list[tuple[str, str]]:
    """(channel, session) of each unattended run the settings and jobs make."""
    runs = [("cron", f"cron:{name}") for name in job_names]
    return [*runs, ("heartbeat", HEARTBEAT_SESSION)] if heartbeat else runs
