"""Which tools a turn may use, decided by channel and session (`[[tools.policy.rules]]`).

The agent loop asks `allows(tool, channel, session)` before it offers a tool to the model
and again before it runs one, so a tool the policy refuses is neither seen nor executed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from squidd.config.tools import PolicyRule, ToolsSettings
from squidd.core.models import SessionId, channel_kind


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
        return cls(tools.policy.rules, tools.policy.default_deny)

    def decide(self, tool: str, channel: str, session: str) -> Decision:
        for number, rule in enumerate(self._rules, start=1):
            if not _channel_matches(channel, rule.channel) or not fnmatchcase(
                session, rule.session
            ):
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


def _channel_matches(channel: str, pattern: str) -> bool:
    """A rule for `matrix` holds on an agent's own Matrix account (`matrix-<agent>`) too."""
    return fnmatchcase(channel, pattern) or fnmatchcase(channel_kind(channel), pattern)


FILE_TOOLS = ("read_file", "write_file", "edit_file", "list_dir")
# Per-turn tools the runtime adds to every turn (they obey the policy too).
SESSION_TOOLS = (
    "memory_write",
    "search_history",
    "recall",
    "cron_add",
    "cron_list",
    "cron_remove",
    "spawn",
    "send_file",
)


def configured_tools(tools: ToolsSettings) -> list[str]:
    """Names of the tools the settings turn on, in the order the model sees them."""
    names = list(FILE_TOOLS)
    if tools.skills.enabled:
        names.append("read_skill")
    if tools.web_fetch.enabled:
        names.append("web_fetch")
    if tools.web_search.enabled:
        names.append("web_search")
    if tools.shell.enabled:
        names.append("shell")
    if tools.search_history_across_sessions:
        names.append("search_all_history")
    session = [n for n in SESSION_TOOLS if n != "spawn" or tools.spawn.enabled]
    return [*names, *session]


def describe_policy(tools: ToolsSettings, channels: Sequence[str]) -> list[str]:
    """Readable lines for `squidd config check`: what each channel may use, then the rules."""
    policy = ConfiguredToolPolicy.from_settings(tools)
    names = configured_tools(tools)
    lines: list[str] = []
    for channel in channels:
        # "*" as the session: only channel-wide rules apply; session rules are listed below.
        refused = [name for name in names if not policy.decide(name, channel, "*").allowed]
        allowed = [name for name in names if name not in refused]
        text = f"{channel}: {', '.join(allowed) if allowed else 'no tools'}"
        if refused:
            text += f" (refused: {', '.join(refused)})"
        lines.append(text)
    for number, rule in enumerate(tools.policy.rules, start=1):
        parts = [f"rule {number}: channel {rule.channel}", f"session {rule.session}"]
        if rule.allow:
            parts.append(f"allow {', '.join(rule.allow)}")
        if rule.deny:
            parts.append(f"deny {', '.join(rule.deny)}")
        lines.append(", ".join(parts))
    if not tools.shell.enabled:
        lines.append("shell: off ([tools.shell] enabled = false)")
    return lines
