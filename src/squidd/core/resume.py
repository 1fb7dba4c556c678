"""Resuming a turn from its journal: the two places a Turn (core/turns.py) meets what it
recorded before it was cut short (core/journal.py).

`TurnRecording` is the journal turns record in, the effect overrides per tool name and the
age past which a journal is not resumed. `load_replay` reads a turn's records as it is
prepared, or answers a journal too old to resume with a notice (no model call);
`recorded_result` gives a call's recorded result, or None when the call is to run now, or
tells the model the outcome is unknown when a call started without a result and its tool
must not run twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog

from squidd.core.journal import (
    INTERRUPTED,
    Effect,
    Replay,
    effect_of,
    may_rerun,
    stale_notice,
)
from squidd.core.models import ToolCall, utcnow
from squidd.core.on_demand import LOAD_TOOLS
from squidd.core.ports import Tool, TurnJournal

log = structlog.get_logger()


@dataclass(frozen=True)
class TurnRecording:
    """The journal a turn with a `turn_id` records in, and how its records are used:
    effect overrides per tool name, and the age past which a journal is not resumed."""

    journal: TurnJournal
    effects: Mapping[str, Effect] = field(default_factory=dict)
    max_age: timedelta = timedelta(hours=24)
    now: Callable[[], datetime] = utcnow


@dataclass(frozen=True)
class Resumed:
    """What a turn cut short recorded: its journal key, and either what to replay or, for
    a journal too old to resume, the notice that answers instead (`reply`)."""

    key: str
    replay: Replay | None = None
    reply: str | None = None


async def load_replay(recording: TurnRecording | None, turn_id: str | None) -> Resumed | None:
    """Read what the turn `turn_id` recorded before it was cut short (None: it records
    nothing); one too old to resume is answered with a notice, without a model call."""
    if recording is None or turn_id is None:
        return None
    replay = await recording.journal.load(turn_id)
    if replay is None:
        return Resumed(turn_id)
    if replay.too_old(recording.now(), recording.max_age):
        log.warning(
            "turn_not_resumed", turn=turn_id, reason="too old", since=str(replay.started_at)
        )
        return Resumed(turn_id, reply=stale_notice(replay, recording.max_age))
    log.info(
        "turn_resumed",
        turn=turn_id,
        answers=len(replay.answers),
        results=len(replay.results),
        unfinished=len(replay.started - set(replay.results)),
    )
    return Resumed(turn_id, replay=replay)


async def recorded_result(
    recording: TurnRecording | None,
    key: str | None,
    replay: Replay | None,
    call: ToolCall,
    tool: Tool | None,
) -> str | None:
    """The result of a call the turn made before it was cut short, or None when the call
    is to run now: it never started, or it started without a recorded result and its tool
    (`tool`, None when the turn does not offer it) may run twice. Otherwise the model is
    told the outcome is unknown (and that is recorded as the call's result)."""
    if replay is None or recording is None or key is None:
        return None
    if call.name == LOAD_TOOLS:
        return None  # it only offers schemas within the turn: run again to offer them
    if call.id in replay.results:
        return replay.results[call.id]
    if call.id not in replay.started:
        return None
    effect = effect_of(call.name, tool, recording.effects)
    if may_rerun(effect):
        log.info("tool_call_rerun", tool=call.name, effect=str(effect))
        return None
    log.warning("tool_call_outcome_unknown", tool=call.name, effect=str(effect))
    content = INTERRUPTED.format(name=call.name)
    await recording.journal.result(key, call.id, content)
    return content
