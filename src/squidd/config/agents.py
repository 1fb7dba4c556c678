"""Several assistants in one daemon: `[[agents.list]]`, each an agent with a workspace of its
own (SOUL.md, AGENTS.md, USER.md, MEMORY.md, skills), its own provider chain and the rooms
and addresses routed to it; what it does not set it takes from `[agents]`.

The first entry is the default agent: what no rule routes goes to it, and its sessions,
summaries and memory are the data dir's own (`sessions/`, `memory/`, the workspace), so a
data dir of a version before agents is the default agent's as it stands: nothing moves,
nothing is answered twice. Each other agent keeps its sessions, summaries, cursors and
history index under `agents/<name>/` and its workspace in `agents/<name>/workspace` unless
it names one. A config without `[[agents.list]]` is one agent, exactly as before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import AliasChoices, BaseModel, Field, field_validator

from squidd.config._base import Section
from squidd.config.accounts import AgentMail, AgentMatrix
from squidd.config.heartbeat import HeartbeatSettings
from squidd.config.limits import LimitsSettings
from squidd.config.speech import ReplyMode
from squidd.config.tools import ApprovalSettings, PolicySettings

__all__ = ["AGENT_NAME_RE", "CAP_KEYS", "AgentEntry", "merged"]

AGENT_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_ROOM_RE = re.compile(r"^![^\s]+$")  # room version 12 ids carry no server name
_ADDRESS_RE = re.compile(r"^[^@\s]+@[^@\s]+$")

CAP_KEYS = (
    "daily_tokens",
    "session_daily_tokens",
    "daily_cost",
    "heartbeat_daily_tokens",
    "cron_daily_tokens",
)
"""The `[limits]` keys that are caps: an agent's count only its own usage."""


class AgentEntry(Section):
    """One agent (`[[agents.list]]`): a name, where it lives, what is routed to it, and the
    `[agents]` keys it sets for itself."""

    name: str
    workspace: Path | None = None
    """Its SOUL.md, AGENTS.md, USER.md, HEARTBEAT.md, MEMORY.md and skills; unset: the
    default agent's is `agents.workspace` (as before), another's `agents/<name>/workspace`
    in the data dir."""
    chain: list[str] = Field(default_factory=list)
    """Its provider/model pairs (`[llm] chain`'s form); empty: the daemon's chain."""
    rooms: list[str] = Field(default_factory=list)
    """Matrix rooms whose messages it answers (room ids)."""
    addresses: list[str] = Field(default_factory=list)
    """Mail addresses whose mail it answers (the bot's own with a +tag, e.g.
    bot+planner@example.org; `bot+<name>@` reaches the agent named so without listing it)."""
    matrix: AgentMatrix | None = None
    """A Matrix bot account of its own (`[agents.list.matrix]`: `user_id` and its password
    or token; config/accounts.py): everything that reaches it is this agent's."""
    email: AgentMail | None = None
    """A mailbox of its own (`[agents.list.email]`: `address` and its login; the rest from
    `[email]`; config/accounts.py): every mail that reaches it is this agent's."""
    system_prompt: str | None = None
    memory_scope: Literal["auto", "shared", "person"] | None = None
    consolidation_threshold: int | None = Field(default=None, gt=0)
    keep_recent_ratio: float | None = Field(default=None, gt=0, lt=1)
    max_tool_rounds: int | None = Field(default=None, gt=0, le=200)
    context_budget: float | None = Field(default=None, gt=0)
    memory_max_chars: int | None = Field(default=None, gt=0)
    tools: PolicySettings | None = None
    """`[tools.policy]`'s keys (`default_deny`, `rules`) for this agent's turns."""
    approvals: ApprovalSettings | None = None
    """`[tools.approval]`'s keys (`tools`, `approvers`, `timeout_s`, `unattended`)."""
    limits: LimitsSettings | None = Field(
        default=None, validation_alias=AliasChoices("limits", "caps")
    )
    """`[limits]`'s keys (also spelt `caps`): its caps count its own usage only; the
    daemon's `[limits]` caps still hold for all agents together."""
    heartbeat: HeartbeatSettings | None = None
    """`[heartbeat]`'s keys: its own beat, over its workspace's HEARTBEAT.md."""
    voice_reply: ReplyMode | None = None
    """When its answers are also spoken (`[speech] reply`'s values); unset: `[speech]`'s."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not AGENT_NAME_RE.match(value):
            raise ValueError(
                "must be a short lower-case name (letters, digits, '-', '_'), e.g. 'home'"
            )
        return value

    @field_validator("rooms")
    @classmethod
    def _rooms(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _ROOM_RE.match(value):
                raise ValueError(f"{value!r} is not a Matrix room id like '!abc:example.org'")
        return values

    @field_validator("addresses")
    @classmethod
    def _addresses(cls, values: list[str]) -> list[str]:
        for value in values:
            if not _ADDRESS_RE.match(value):
                raise ValueError(f"{value!r} is not a mail address")
        return [v.lower() for v in values]

    @field_validator("workspace")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser()

    def overrides(self) -> dict[str, object]:
        """The `[agents]` keys this agent sets for itself."""
        keys = (
            "system_prompt",
            "memory_scope",
            "consolidation_threshold",
            "keep_recent_ratio",
            "max_tool_rounds",
            "context_budget",
            "memory_max_chars",
        )
        return {key: getattr(self, key) for key in keys if getattr(self, key) is not None}


Model = TypeVar("Model", bound=BaseModel)


def merged(base: Model, over: BaseModel | None) -> Model:
    """`base` with the keys `over` was given (key by key; the others stay `base`'s)."""
    if over is None:
        return base
    return base.model_copy(update={key: getattr(over, key) for key in over.model_fields_set})
