"""Which tools a turn may use, decided by channel and session (`[[tools.policy]]` rules).

The agent loop asks `allows(tool, channel, session)` before it offers a tool to the model
and again before it runs one, so a tool the policy refuses is neither seen nor executed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from squidd.config.tools import PolicyRule, ToolsSettings
from squidd.core.models import SessionId


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str


def _matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


class ConfiguredToolPolicy:
    """Implements `squidd.core.ports.ToolPolicy` from the settings."""

    def __init__(self, rules: Sequence[PolicyRule], default_deny: Sequence[str]) -> None:
        self._rules = tuple(rules)
        self._default_deny = tuple(default_deny)

    @classmethod
    def from_settings(cls, tools: ToolsSettings) -> ConfiguredToolPolicy:
        return cls(tools.policy, tools.default_deny)

    def decide(self, tool: str, channel: str, session: str) -> Decision:
        for number, rule in enumerate(self._rules, start=1):
            if not fnmatchcase(channel, rule.channel) or not fnmatchcase(session, rule.session):
                continue
            if _matches_any(tool, rule.deny):
                return Decision(False, f"denied by rule {number}")
            if _matches_any(tool, rule.allow):
                return Decision(True, f"allowed by rule {number}")
        if _matches_any(tool, self._default_deny):
            return Decision(False, "in default_deny")
        return Decision(True, "default")

    def allows(self, tool: str, channel: str, session: SessionId) -> bool:
        return self.decide(tool, channel, session).allowed
