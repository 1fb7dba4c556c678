"""What `squidd chat` runs its turns with (`Terminal`), as gateway/build.py builds it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from squidd.core.approvals import Approvals
from squidd.gateway.caps import DailyCaps, agent_figures
from squidd.gateway.conversations import Conversations
from squidd.gateway.costs import usage_today
from squidd.gateway.runtime import Runtime
from squidd.gateway.turn_tools import TurnTools

__all__ = ["Terminal"]


@dataclass(frozen=True, slots=True)
class Terminal:
    """What `squidd chat` runs a turn with; `caps` is None when the owner lifted the daily
    caps for this run (`squidd chat --ignore-caps`)."""

    runtime: Runtime
    tools: TurnTools
    caps: DailyCaps | None
    conversations: Conversations
    """The terminal session's current session and model (`/new`, `/model`)."""

    async def usage_today(self) -> dict[str, Any]:
        """For the chat commands (`/usage`, `/status`), as the daemon counts it."""
        return await usage_today(self.runtime.settings, self.runtime.usage)

    async def agent_figures(self) -> dict[str, Any]:
        """For `/status`: the agent talked to, its usage today and own caps."""
        return await agent_figures(self.runtime, self.caps)

    def approvals(self) -> Approvals | None:
        """For `/approvals`: the terminal asks its questions in place, none wait."""
        return self.runtime.approvals

    def model_state(self) -> dict[str, Any]:
        return self.runtime.llm.snapshot()
