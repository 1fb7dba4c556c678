"""`agent_loop(...)`: an `AgentLoop` from the flat keywords tests name (the collaborators of
`TurnServices` and the limits of `TurnLimits`, side by side), so a test says only what it
changes."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from squidd.core.agent import AgentLoop
from squidd.core.ports import LLMPort
from squidd.core.turn_services import TurnLimits, TurnServices

_LIMITS = {f.name for f in fields(TurnLimits)}


def agent_loop(*, llm: LLMPort, **given: Any) -> AgentLoop:
    limits = TurnLimits(**{k: v for k, v in given.items() if k in _LIMITS})
    rest = {k: v for k, v in given.items() if k not in _LIMITS}
    return AgentLoop(llm=llm, services=TurnServices(limits=limits, **rest))
