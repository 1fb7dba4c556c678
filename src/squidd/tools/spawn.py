"""`spawn(task, wait)`: hand a task to a sub-agent that works in its own session.

A sub-agent's session is `<parent>/sub:<id>`; its first user message is the task text. It
runs with a restricted tool set: what the policy allows its root conversation's channel,
minus `tools.spawn.denied_tools`, and `spawn` itself only when nesting is configured and
the depth cap is not reached. `wait=true` returns the sub-agent's report as the tool result
(cancelling the parent's turn cancels it, since it runs inside that turn);
`wait=false` starts it in the background and its report reaches the conversation later.
How the sub-agent runs (timeout, step cap, caps on how many run) is the runner's business:
the tool only checks the arguments and the depth, and names the refusal it gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Protocol

import structlog
from pydantic import Field, StringConstraints

from squidd.core.journal import Effect
from squidd.core.models import SessionId, ToolResult
from squidd.core.ports import ToolPolicy
from squidd.errors import ToolError
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared

log = structlog.get_logger()

SUB_MARK = "/sub:"
SUBAGENT_CHANNEL = "subagent"
REPORT_CHANNEL = "subagent_report"
"""The run that hands a background sub-agent's report to its conversation as a turn."""
_MAX_TASK_CHARS = 8000


def depth_of(session: str) -> int:
    """How many sub-agents deep a session is (0: a conversation)."""
    return session.count(SUB_MARK)


def root_of(session: str) -> str:
    """The conversation a (sub-)sub-agent session descends from."""
    return session.split(SUB_MARK, 1)[0]


def subagent_channel(root_channel: str) -> str:
    """The channel name a sub-agent's turn runs under: it carries the root's channel, so
    the policy can refuse a sub-agent what it refuses the conversation that started it."""
    return f"{SUBAGENT_CHANNEL}:{root_channel}"


class SubAgentRunner(Protocol):
    """What the gateway provides: run a sub-agent now, or start one in the background."""

    async def run_waiting(
        self, parent: SessionId, root_channel: str, task: str
    ) -> str: ...  # the report; ToolError when refused or failed

    async def start_background(
        self, parent: SessionId, root_channel: str, task: str, reply_to: str
    ) -> str: ...  # the sub-agent's session id; ToolError when refused


class SubAgentPolicy:
    """The configured policy, narrowed for sub-agents (channel `subagent:<root channel>`):
    a tool must be allowed for the root conversation, allowed for channel `subagent`, and
    not in `denied`. Other turns get the configured policy unchanged."""

    def __init__(self, base: ToolPolicy | None, denied: tuple[str, ...]) -> None:
        self._base = base
        self._denied = frozenset(denied)

    def allows(self, tool: str, channel: str, session: SessionId) -> bool:
        base = self._base
        prefix = f"{SUBAGENT_CHANNEL}:"
        if not channel.startswith(prefix):
            return base is None or base.allows(tool, channel, session)
        if tool in self._denied:
            return False
        if base is None:
            return True
        root = SessionId(root_of(session))
        return base.allows(tool, channel[len(prefix) :], root) and base.allows(
            tool, SUBAGENT_CHANNEL, session
        )


class SpawnArguments(Arguments):
    task: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=_MAX_TASK_CHARS)
    ] = Field(description="What the sub-agent should do.")
    wait: bool = Field(True, description="Wait for the report (default true).")


class SpawnTool(Declared[SpawnArguments], name="spawn", effect=Effect.SIDE_EFFECT):
    description = (
        "Hand a self-contained task to a sub-agent working in its own conversation with "
        "fewer tools. wait=true (default): wait and get its report as the result. "
        "wait=false: it works in the background and its report is sent to this "
        "conversation when done. Give the task all the context it needs."
    )

    def __init__(
        self,
        runner: SubAgentRunner,
        session: SessionId,
        root_channel: str,
        *,
        reply_to: str,
        max_depth: int,
    ) -> None:
        self._runner = runner
        self._session = session
        self._root_channel = root_channel
        self._reply_to = reply_to
        self._max_depth = max_depth

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        args = self.parse(arguments)
        task, wait = args.task, args.wait
        depth = depth_of(self._session) + 1
        if depth > self._max_depth:
            log.warning(
                "spawn_refused",
                session=self._session,
                reason="depth",
                depth=depth,
                max_depth=self._max_depth,
            )
            raise ToolError(
                f"sub-agents may not go deeper than {self._max_depth}; do the task yourself"
            )
        if wait:
            report = await self._runner.run_waiting(self._session, self._root_channel, task)
            return ToolResult(report)
        sub = await self._runner.start_background(
            self._session, self._root_channel, task, self._reply_to
        )
        where = "this conversation" if self._reply_to else "its own history only (no reply address)"
        return ToolResult(
            f"Sub-agent {sub} started in the background; its report will go to {where}."
        )
