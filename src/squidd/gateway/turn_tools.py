"""The one place that decides a turn's per-call tools, for every kind of turn.

Per-call tools are bound to one session (send_file to one turn's reply) and handed to
`AgentLoop.run(..., extra_tools=...)`; they are built anew for each call. `TurnTools.for_turn`
decides them from a `TurnScope` for every kind of turn:

- a conversation's turn (terminal, Matrix, email, a cron job, the heartbeat, a sub-agent's
  report): memory_write (the speaker's own memory, or the shared one: gateway/people.py) and
  search_history, with memory per person search_all_history over the conversations the
  speaker spoke in (private turns only), the cron tools (cron on), spawn (sub-agents on;
  its sub-agents inherit the channel's restrictions), send_file (only when the answer goes
  somewhere that can carry a file) and the tools of the MCP servers up right now (the
  policy filters them per channel);
- a sub-agent's own turn: search_history over its own session and, where nesting is
  allowed, spawn; it writes no memory, schedules nothing, sends no file.

`TurnTools` also owns the `SubAgents` (the spawn tool's runner), whose runs take their tools
from the same function.
"""

from __future__ import annotations

from dataclasses import dataclass

from squidd.core.cron_service import CronJobs
from squidd.core.models import HistoryHit, Inbound, SessionId
from squidd.core.ports import Tool
from squidd.core.reply_files import ReplyFiles
from squidd.gateway.cron_targets import command_line_check
from squidd.gateway.people import NOBODY, Speaker, memory_scope
from squidd.gateway.runtime import Runtime
from squidd.gateway.subagents import Fire, SubAgents
from squidd.store.cron_jobs import JobsFile
from squidd.tools.cron import CronToolContext, cron_tools
from squidd.tools.mcp import McpHub
from squidd.tools.memory_write import MemoryWriteTool
from squidd.tools.recall import RecallTool
from squidd.tools.search_history import SearchAllHistoryTool, SearchHistoryTool
from squidd.tools.send_file import SendFileTool


@dataclass(frozen=True, slots=True)
class TurnScope:
    """What a turn's per-call tools depend on.

    `channel` is the channel whose restrictions apply (a sub-agent's: its root
    conversation's); `reply_to` is where scheduled replies and reports go by default ("" for
    nowhere); `reply_files` collects the files of a reply that can carry them (else None: no
    send_file); `sub_agent` marks a sub-agent's own turn.
    """

    session: SessionId
    channel: str
    reply_to: str = ""
    reply_files: ReplyFiles | None = None
    sub_agent: bool = False
    speaker: Speaker = NOBODY

    @classmethod
    def of(
        cls, inbound: Inbound, reply_files: ReplyFiles | None = None, speaker: Speaker = NOBODY
    ) -> TurnScope:
        """The scope of a router turn: under the conversation's channel (`turn_channel`),
        scheduled replies going where its answers go, memory as `speaker` may use it."""
        destination = inbound.destination
        return cls(
            session=inbound.session_id,
            channel=inbound.turn_channel,
            reply_to=str(destination) if destination is not None else "",
            reply_files=reply_files,
            speaker=speaker,
        )


class TurnTools:
    """Decides the per-call tools of every turn; built once by the composition root."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        cron: CronJobs | None = None,
        mcp: McpHub | None = None,
        fire: Fire | None = None,
    ) -> None:
        self._runtime = runtime
        settings = runtime.settings
        # Without the daemon's service (the terminal): no scheduler to wake, none runs now.
        self._cron = cron or CronJobs(
            JobsFile(settings.storage.data_dir),
            default_timezone=settings.cron.default_timezone,
            check_target=command_line_check(settings),  # the running daemon asked, if any
        )
        self._mcp = mcp
        self._scope = memory_scope(settings)
        # The agent whose turns these are ("" with one agent: jobs as they always were).
        self._agent = runtime.name if runtime.settings.agents.list else ""
        # Background sub-agents need `fire` (the daemon's durable runs); without it (the
        # terminal) they run only with wait=true.
        self.subagents = SubAgents(runtime, tools=self._sub_agent_tools, fire=fire)

    def _sub_agent_tools(self, session: SessionId, channel: str, reply_to: str) -> list[Tool]:
        return self.for_turn(TurnScope(session, channel, reply_to=reply_to, sub_agent=True))

    def _search_all(self, speaker: Speaker) -> list[Tool]:
        """With memory per person: search across the conversations the speaker spoke in,
        in a private turn only (a group room would read one person's history to everyone)."""
        settings = self._runtime.settings
        person = speaker.memory_of
        if not settings.tools.search_history_across_sessions or self._scope != "person":
            return []
        if person is None:
            return []
        store = self._runtime.store

        async def search(query: str, limit: int) -> list[HistoryHit]:
            return await store.search_all_sessions(query, limit=limit, person=person)

        return [SearchAllHistoryTool(search, limit=settings.tools.search_history_limit)]

    def _recall(self, speaker: Speaker) -> list[Tool]:
        """`recall` with an embeddings model, where the speaker's scope allows one
        (gateway/recall.py); without one, search_all_history is the keyword search."""
        recall = self._runtime.recall
        if recall is None or recall.index is None or not recall.available(speaker.memory_of):
            return []
        person, tokens = speaker.memory_of, self._runtime.settings.memory.recall.tool_tokens

        async def search(query: str) -> list[str]:
            return await recall.recall(query, person, tokens)

        return [RecallTool(search)]

    def for_turn(self, scope: TurnScope) -> list[Tool]:
        """Every per-call tool of one turn, built anew (see the module docstring)."""
        runtime = self._runtime
        settings = runtime.settings
        search = SearchHistoryTool(
            runtime.store, scope.session, limit=settings.tools.search_history_limit
        )
        spawn = self.subagents.spawn_tools(scope.session, scope.channel, scope.reply_to)
        if scope.sub_agent:
            return [search, *spawn]
        memory = MemoryWriteTool(
            runtime.store,
            scope.session,
            max_chars=settings.agents.memory_max_chars,
            person=scope.speaker.memory_of,
        )
        tools: list[Tool] = [
            memory,
            search,
            *self._search_all(scope.speaker),
            *self._recall(scope.speaker),
        ]
        if settings.cron.enabled:
            context = CronToolContext(
                self._cron, scope.session, default_target=scope.reply_to, agent=self._agent
            )
            tools.extend(cron_tools(context))
        tools.extend(spawn)
        if scope.reply_files is not None:
            tools.append(
                SendFileTool(
                    settings.workspace_dir,
                    runtime.media.root,
                    scope.reply_files,
                    max_bytes=settings.media.max_send_bytes,
                )
            )
        # The MCP tools of the servers up right now (the policy filters them per channel).
        return [*tools, *(self._mcp.tools() if self._mcp is not None else ())]
