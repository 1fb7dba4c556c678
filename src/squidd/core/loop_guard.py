"""Loop breakers: when a turn must stop calling tools, and what the model is told then.

Three limits end a turn's tool calling: the number of rounds (`agents.max_tool_rounds`),
the same tool with the same arguments K times in a row (`agents.max_repeated_tool_calls`),
and a wall-clock limit (`agents.max_turn_seconds`). When one is hit, the model gets one more
call without tools, told why, and asked for its final answer; a model stuck calling one tool
172 times costs at most K calls and one answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from squidd.core.models import ToolCall

FINAL_ANSWER = (
    "[System: {reason} No more tool calls are possible in this turn. Give your final answer "
    "now from what you have: say what you found, what is unfinished, and what the owner "
    "could do next.]"
)


def _canonical(arguments: str) -> str:
    """Arguments as compared for repetition: whitespace outside strings does not count."""
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments.strip()


class LoopGuard:
    """Watches one turn's tool calls; `reason()` says why they must stop, or None."""

    def __init__(
        self,
        *,
        max_rounds: int,
        max_repeats: int,
        max_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_rounds = max_rounds
        self._max_repeats = max_repeats
        self._max_seconds = max_seconds
        self._monotonic = monotonic
        self._started = monotonic()
        self._rounds = 0
        self._last: tuple[str, str] | None = None
        self._repeats = 0
        self._repeated: str | None = None

    def note(self, calls: Sequence[ToolCall]) -> None:
        """Record one round of tool calls (in the order they were asked for)."""
        self._rounds += 1
        for call in calls:
            key = (call.name, _canonical(call.arguments))
            if key == self._last:
                self._repeats += 1
            else:
                self._last, self._repeats = key, 1
            if self._repeats >= self._max_repeats:
                self._repeated = call.name

    def reason(self) -> str | None:
        if self._repeated is not None:
            return (
                f"You called {self._repeated} with the same arguments {self._max_repeats} "
                "times in a row; calling it again will not give a different result."
            )
        if self._rounds >= self._max_rounds:
            return f"This turn reached its limit of {self._max_rounds} rounds of tool calls."
        elapsed = self._monotonic() - self._started
        if elapsed >= self._max_seconds:
            return f"This turn has used its time limit of {int(self._max_seconds)} seconds."
        return None

    def final_prompt(self, reason: str) -> str:
        return FINAL_ANSWER.format(reason=reason)
