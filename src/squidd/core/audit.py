"""What the audit log records about each tool call, and the chain that makes it tamper-evident.

Every tool call a turn runs (or is refused to run after asking) becomes one `AuditEntry`:
when, in which session and channel, which tool, the arguments' hash (`arguments_hash`, the
same hash an approval binds, core/approvals.py) and a short preview with secrets scrubbed,
the decision (`Decision`), who decided, how long it ran, how long the result was, the
error if it failed, and (when known) the agent and the person whose turn it was. `Auditor`
builds the entries for the turn steps and hands them to an `AuditSink` (store/audit.py
keeps them as JSON lines under `<data dir>/audit/`).

The chain: each line carries `prev`, the previous line's hash, and `hash`, the SHA-256 of
`prev` and the line's canonical JSON without `hash` (`seal`). `check_chain` walks lines in
order and names the first that does not hold: an edited byte changes that line's hash or
its canonical form, a removed or reordered line breaks the next line's `prev`, and the head
(the last hash and line count, kept apart from the log) catches a removed last line.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from squidd.core.models import SessionId, ToolCall, utcnow
from squidd.errors import SquiddError

log = structlog.get_logger()

GENESIS = "0" * 64
PREVIEW_CHARS = 200


class Decision(enum.StrEnum):
    """How a call came to run, or not."""

    ALLOWED = "allowed"  # no question asked: the tool does not need approval
    APPROVED = "approved"  # asked, and approved once
    ALWAYS = "always"  # approved by an `always` rule (granted before, or with this answer)
    DENIED = "denied"  # asked, and refused (or no way to ask)
    TIMEOUT = "timeout"  # asked, and no answer in time


def canonical_arguments(arguments: str) -> str:
    """The call's arguments in one canonical form: the JSON object re-dumped with sorted
    keys (so the same arguments in another order or spacing hash the same), else the raw
    text as sent."""
    try:
        value = json.loads(arguments.strip() or "{}")
    except json.JSONDecodeError:
        return arguments
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def arguments_hash(tool: str, arguments: str) -> str:
    """SHA-256 of the tool name and its canonical arguments: what an approval binds."""
    data = f"{tool}\n{canonical_arguments(arguments)}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def preview(arguments: str, scrub: Callable[[str], str], limit: int = PREVIEW_CHARS) -> str:
    """A short, one-line view of the arguments, scrubbed before it is cut (so a secret is
    never half-kept where the cut would stop its pattern from matching)."""
    text = " ".join(scrub(canonical_arguments(arguments)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class AuditEntry:
    time: str
    session: str
    channel: str
    tool: str
    args_sha256: str
    preview: str
    decision: Decision
    by: str | None
    duration_ms: int
    result_chars: int
    error: str | None
    agent: str = ""
    """The agent whose turn made the call ("" with one agent; records from before agents
    lack it, and their hashes hold as written)."""
    person: str = ""
    """Who asked, when the turn knew (the person's id); "" for runs nobody asked for."""


class AuditSink(Protocol):
    """Where audit entries go (store/audit.py: a hash-chained JSON-lines file)."""

    async def append(self, entry: AuditEntry) -> None: ...


def _dump(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=True)


def seal(number: int, prev: str, fields: dict[str, Any]) -> str:
    """The line for entry `number` after the line hashed `prev`: canonical JSON whose
    last key, `hash`, covers everything before it."""
    body = {"n": number, **fields, "prev": prev}
    digest = hashlib.sha256(f"{prev}\n{_dump(body)}".encode()).hexdigest()
    return _dump({**body, "hash": digest})


class ChainBroken(SquiddError):
    """The audit log does not hold: `line` (1-based) is the first line that fails."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


def _check_line(number: int, raw: str, prev: str) -> str:
    """The hash of line `number` when it holds after `prev`; raises `ChainBroken`."""
    try:
        record = json.loads(raw)
    except json.JSONDecodeError:
        raise ChainBroken(number, "not valid JSON (the line was changed or cut)") from None
    if not isinstance(record, dict) or not isinstance(record.get("hash"), str):
        raise ChainBroken(number, "not an audit record")
    if _dump(record) != raw:
        raise ChainBroken(number, "not in its written form (the line was changed)")
    digest = record.pop("hash")
    if record.get("n") != number:
        raise ChainBroken(number, f"numbered {record.get('n')!r} (a line was removed or moved)")
    if record.get("prev") != prev:
        raise ChainBroken(number, "does not follow the line before it (removed, moved or changed)")
    if hashlib.sha256(f"{prev}\n{_dump(record)}".encode()).hexdigest() != digest:
        raise ChainBroken(number, "its hash does not match its content (the line was changed)")
    return str(digest)


def check_chain(lines: Sequence[str], head: tuple[int, str] | None) -> str:
    """The last hash of `lines` when every line holds and the head (count, last hash)
    agrees; raises `ChainBroken` naming the first line that does not."""
    prev = GENESIS
    for index, raw in enumerate(lines):
        prev = _check_line(index + 1, raw, prev)
    if head is None:
        if lines:
            raise ChainBroken(1, "the head (last hash and line count) is missing")
        return prev
    count, last = head
    if count > len(lines):
        raise ChainBroken(len(lines) + 1, f"missing: the head names {count} lines")
    if count < len(lines):
        raise ChainBroken(count + 1, "not named by the head (added after the last one sealed)")
    if last != prev:
        raise ChainBroken(max(count, 1), "its hash differs from the head's")
    return prev


class Auditor:
    """Builds the audit entry of each tool call for the turn steps and hands it on; a
    broken sink is logged, never the end of the turn."""

    def __init__(self, sink: AuditSink, scrub: Callable[[str], str], *, agent: str = "") -> None:
        self._sink = sink
        self._scrub = scrub
        self._agent = agent

    def for_agent(self, agent: str) -> Auditor:
        """The auditor of agent `agent`'s turns: the same log, each entry naming it."""
        return Auditor(self._sink, self._scrub, agent=agent)

    async def record(
        self,
        session: SessionId,
        channel: str,
        call: ToolCall,
        *,
        decision: Decision,
        by: str | None = None,
        seconds: float = 0.0,
        result_chars: int = 0,
        error: str | None = None,
        person: str | None = None,
    ) -> None:
        entry = AuditEntry(
            time=utcnow().isoformat(timespec="milliseconds"),
            session=session,
            channel=channel,
            tool=call.name,
            args_sha256=arguments_hash(call.name, call.arguments),
            preview=preview(call.arguments, self._scrub),
            decision=decision,
            by=by,
            duration_ms=int(seconds * 1000),
            result_chars=result_chars,
            error=None if error is None else self._scrub(error)[:PREVIEW_CHARS],
            agent=self._agent,
            person=person or "",
        )
        try:
            await self._sink.append(entry)
        except SquiddError as exc:
            log.error("audit_append_failed", tool=call.name, reason=str(exc))  # noqa: TRY400 - the reason says it
