"""What a turn journal holds, and how a turn cut short is resumed from it.

A turn that asks for tools records, as it goes, each model answer that asks for tools, each
tool call's start and each tool call's result, every record durable before the next step
acts (the store is `store/journal.py`, the port `TurnJournal` in core/ports.py; the steps
that record are in core/turns.py). When the same inbound comes back (a redelivery, a pending
run after a restart), the turn is resumed instead of replayed: recorded answers are not asked
for again, recorded results are used as they are, and the turn goes on from the first step
that has no record.

A call that started but has no result may or may not have happened. It runs again only when
its tool is read-only or idempotent (`Effect`); otherwise the model gets `INTERRUPTED` as its
result, so that it can check or tell the person. A tool declares its class with an `effect`
attribute (built-in tools in code, MCP tools from their annotations); configuration may
override it per tool name; a tool that declares nothing is a side effect.

The journal is not the history: the memory system never reads it, and the finished turn
enters the session's JSONL once, as without a journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from squidd.core.models import ToolCall


class Effect(StrEnum):
    """What running a tool twice does."""

    READ_ONLY = "read_only"  # changes nothing
    IDEMPOTENT = "idempotent"  # a second run leaves the same state as one
    SIDE_EFFECT = "side_effect"  # a second run may do it twice (send, append, pay)


def effect_of(name: str, tool: object | None, overrides: Mapping[str, Effect]) -> Effect:
    """The class of tool `name`: the configured override, else what the tool declares, else
    a side effect. A tool missing now (an MCP server not connected yet after a restart)
    counts as a side effect: its unfinished call is reported, not retried blind."""
    if name in overrides:
        return overrides[name]
    declared = getattr(tool, "effect", None)
    return declared if isinstance(declared, Effect) else Effect.SIDE_EFFECT


def may_rerun(effect: Effect) -> bool:
    return effect is not Effect.SIDE_EFFECT


INTERRUPTED = (
    "[System: this call of {name} was interrupted (the assistant was stopped while it ran) "
    "and it is not known whether it took effect. It was not run again. Check its effect "
    "before repeating it, or tell the person.]"
)


def turn_key(channel: str, source_id: str) -> str:
    """The journal key of the turn that answers an inbound: stable across redeliveries."""
    return f"{channel}:{source_id}"


@dataclass(frozen=True)
class RecordedAnswer:
    """A model answer that asked for tools, as recorded."""

    text: str
    calls: tuple[ToolCall, ...]
    ts: str


@dataclass
class Replay:
    """A turn's journal as read back: what is already done."""

    started_at: datetime
    answers: list[RecordedAnswer] = field(default_factory=list)
    started: set[str] = field(default_factory=set)  # call ids whose start is recorded
    results: dict[str, str] = field(default_factory=dict)  # call id -> result as recorded
    next_answer: int = 0  # the index of the answer the next round takes

    def take_answer(self) -> RecordedAnswer | None:
        """The recorded answer for the next round, or None when the model must be asked."""
        if self.next_answer >= len(self.answers):
            return None
        answer = self.answers[self.next_answer]
        self.next_answer += 1
        return answer

    def too_old(self, now: datetime, max_age: timedelta) -> bool:
        return now - self.started_at > max_age

    def done_steps(self) -> list[str]:
        """What the turn did, in words, for the notice of a turn too old to resume."""
        steps: list[str] = []
        for answer in self.answers:
            for call in answer.calls:
                if call.id in self.results:
                    steps.append(f"{call.name} (finished)")
                elif call.id in self.started:
                    steps.append(f"{call.name} (interrupted, effect unknown)")
        return steps


def stale_notice(replay: Replay, max_age: timedelta) -> str:
    """The reply to a request whose journal is too old to resume: said, never dropped."""
    hours = max_age.total_seconds() / 3600
    steps = replay.done_steps()
    done = f" Steps already taken: {', '.join(steps)}." if steps else ""
    return (
        f"I was interrupted while working on this request (started "
        f"{replay.started_at.isoformat(timespec='minutes')}) and did not finish it. It is "
        f"older than {hours:g} h, so I did not pick it up again.{done} Please ask again if "
        "it is still needed."
    )
