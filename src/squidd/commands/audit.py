"""`squidd audit [list] [--agent A] [--person P] [--session S] [--tool T] [--decision D]
[--day YYYY-MM-DD]` and `squidd audit verify`: the tool calls the assistant made, and proof
the log is unchanged. A call recorded before agents (no agent named) is the default agent's.

Reads `<data dir>/audit/` (store/audit.py) directly, whether the daemon runs or not.
`list` prints the calls, newest last; `verify` walks the hash chain and the head kept apart
from the log, and names the first line that does not hold (exit 1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from squidd.commands import Commands
from squidd.config import Settings
from squidd.core.audit import ChainBroken, Decision
from squidd.errors import StorageError
from squidd.log import escape_unprintable
from squidd.store.audit import AuditFile

__all__ = ["audit_list", "audit_verify", "register"]


def register(commands: Commands) -> None:
    parser = commands.add(
        "audit",
        help="the tool calls made, and a check of the audit log",
        run=_run,
        example="squidd audit\nsquidd audit --agent work\nsquidd audit verify",
    )
    parser.add_argument(
        "action", nargs="?", choices=("list", "verify"), default="list", help="list (default)"
    )
    parser.add_argument("--agent", help="only this agent's calls ([[agents.list]])")
    parser.add_argument("--person", help="only the calls of this person's turns (their id)")
    parser.add_argument("--session", help="only this session id")
    parser.add_argument("--tool", help="only this tool")
    parser.add_argument("--decision", choices=[d.value for d in Decision], help="only this one")
    parser.add_argument("--day", help="only this day, YYYY-MM-DD (UTC)")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    log = AuditFile(settings.storage.data_dir)
    if args.action == "verify":
        return audit_verify(log)
    agent = args.agent
    if agent is not None and agent not in settings.agent_names:
        known = ", ".join(settings.agent_names)
        print(f"no agent named {agent!r} (agents: {known})", file=sys.stderr)
        return 2
    return audit_list(
        log,
        session=args.session,
        tool=args.tool,
        decision=args.decision,
        day=args.day,
        agent=agent,
        person=args.person,
        default_agent=settings.default_agent if settings.agents.list else agent,
    )


def _matches(record: dict[str, Any], wanted: dict[str, str | None], default: str | None) -> bool:
    for key, value in wanted.items():
        if value is None:
            continue
        if key == "agent":
            # A record without an agent: the default agent's (one agent, or before agents).
            if (record.get("agent") or default) != value:
                return False
        elif key == "person":
            if record.get("person", "") != value:
                return False
        elif key == "day":
            if not str(record.get("time", "")).startswith(value):
                return False
        elif record.get(key) != value:
            return False
    return True


def format_record(record: dict[str, Any]) -> str:
    by = f" by {record['by']}" if record.get("by") else ""
    error = f"  error: {record['error']}" if record.get("error") else ""
    agent = f"[{record['agent']}] " if record.get("agent") else ""
    person = f" for {record['person']}" if record.get("person") else ""
    line = (
        f"#{record.get('n')}  {record.get('time')}  {agent}{record.get('decision')}{by}{person}  "
        f"{record.get('channel')} {record.get('session')}  {record.get('tool')} "
        f"{record.get('preview')}  ({record.get('duration_ms')} ms, "
        f"{record.get('result_chars')} chars){error}"
    )
    return escape_unprintable(line)


def audit_list(
    log: AuditFile,
    *,
    session: str | None = None,
    tool: str | None = None,
    decision: str | None = None,
    day: str | None = None,
    agent: str | None = None,
    person: str | None = None,
    default_agent: str | None = None,
) -> int:
    """Print the calls that match every filter given; a record naming no agent counts as
    `default_agent`'s."""
    wanted = {
        "session": session,
        "tool": tool,
        "decision": decision,
        "day": day,
        "agent": agent,
        "person": person,
    }
    try:
        records = [r for r in log.records() if _matches(r, wanted, default_agent)]
    except StorageError as exc:
        print(f"cannot read the audit log: {exc}", file=sys.stderr)
        return 1
    if not records:
        print(f"no tool calls recorded (in {log.dir})")
        return 0
    for record in records:
        print(format_record(record))
    return 0


def audit_verify(log: AuditFile) -> int:
    try:
        count, last = log.verify()
    except ChainBroken as exc:
        print(f"audit log broken at {exc} ({log.log_path})", file=sys.stderr)
        return 1
    except StorageError as exc:
        print(f"cannot read the audit log: {exc}", file=sys.stderr)
        return 1
    print(f"audit log intact: {count} lines, head {last}")
    return 0
