"""The router's turn: what runs for one message, cron firing, heartbeat or sub-agent run.

The owner's daily-cap notice is its own answer; a chat command (`/help`, `/new`, `/stop`,
...) is answered by its module without a model call; a capped turn answers with the refusal;
a background sub-agent's run goes to `SubAgents`; anything else is one `AgentLoop.run` in
the conversation's current session (`/new` moves it), with the model the person chose
(`/model`) and the per-call tools `TurnTools` decides for it. A turn `/stop` cancels is
answered with `STOPPED`; its user message, the steps its journal shows and that note enter
the history. It also counts the turns the heartbeat sees as activity (every turn but the
heartbeat's own), and records how long each answered turn took, and its time to first
token where the answer streams (store/timings.py, for the dashboard). An answer that is to be
heard gets its voice notes (gateway/voice.py) after the turn, on the same reply.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import anyio

from squidd.core.approvals import Approvals
from squidd.core.journal import turn_key
from squidd.core.models import (
    Inbound,
    InboundKind,
    LLMEvent,
    Message,
    SessionId,
    StreamRestart,
    TextDelta,
    ToolCallsReady,
)
from squidd.core.ports import StreamsReplies
from squidd.core.reply_files import Reply, ReplyFiles
from squidd.core.turns import OnEvent, now_iso
from squidd.gateway.caps import DailyCaps, agent_figures
from squidd.gateway.chat_commands import ChatCommands
from squidd.gateway.conversations import STOPPED, Conversations
from squidd.gateway.costs import usage_today
from squidd.gateway.people import People
from squidd.gateway.runtime import Runtime
from squidd.gateway.subagents import SubAgents
from squidd.gateway.turn_tools import TurnScope, TurnTools
from squidd.gateway.voice import VoiceReplies
from squidd.store.timings import TimingsLedger

PURPOSES = {InboundKind.CRON: "cron", InboundKind.HEARTBEAT: "heartbeat"}
"""How the usage ledger files the model calls of a run of these kinds (others: by round)."""


@dataclasses.dataclass(slots=True)
class _Clock:
    """A turn's start and, where its answer streams, its first token (monotonic s)."""

    started: float
    first_token: float | None = None

    def took(self, now: float) -> tuple[int, int | None]:
        """(duration, time to the first token or None), in ms."""
        first = self.first_token
        to_first = None if first is None else round((first - self.started) * 1000)
        return round((now - self.started) * 1000), to_first


class TurnRunner:
    """`Router(run_turn=...)` for the daemon; the chat commands' `CommandHost`."""

    def __init__(
        self,
        runtime: Runtime,
        caps: DailyCaps,
        tools: TurnTools,
        streams: Mapping[str, StreamsReplies] | None = None,
        conversations: Conversations | None = None,
        timings: TimingsLedger | None = None,
        voice: VoiceReplies | None = None,
    ) -> None:
        self._runtime = runtime
        self._voice = voice
        self._timings = timings
        self._streams = dict(streams or {})
        self._caps = caps
        self._tools = tools
        self.conversations = conversations or Conversations(runtime)
        self._commands = ChatCommands(self)
        self._people = People(runtime.settings)  # who speaks, whose memory a turn reads
        self.done = 0  # turns other than heartbeats, for the heartbeat's `activity`

    async def usage_today(self) -> dict[str, Any]:
        return await usage_today(self._runtime.settings, self._runtime.usage)

    async def agent_figures(self) -> dict[str, Any]:
        """This agent's name, usage today and own caps; {} with one agent."""
        return await agent_figures(self._runtime, self._caps)

    def approvals(self) -> Approvals | None:
        return self._runtime.approvals

    @property
    def subagents(self) -> SubAgents:
        """This agent's sub-agents (the spawn tool's runner)."""
        return self._tools.subagents

    def model_state(self) -> dict[str, Any]:
        return self._runtime.llm.snapshot()

    async def __call__(self, inbound: Inbound) -> str | Reply:
        if inbound.kind is InboundKind.NOTICE:
            return inbound.text  # the owner's daily-cap notice: no model call
        command_reply = await self._commands.answer(inbound)
        if command_reply is not None:
            return command_reply  # `/help` and the like: answered here, no model call
        refusal = await self._caps.refusal(inbound)
        if refusal is not None:
            return refusal
        if inbound.kind is not InboundKind.HEARTBEAT:
            # Anything but the heartbeat itself counts as a change the heartbeat should see.
            self.done += 1
        if inbound.kind is InboundKind.SUBAGENT:
            return await self._tools.subagents.run_background_turn(inbound)
        conversations = self.conversations
        conversation = inbound.session_id
        turn = dataclasses.replace(inbound, session_id=await conversations.session(conversation))
        # send_file only where the answer goes somewhere that can carry a file.
        files = ReplyFiles() if inbound.destination is not None else None
        key = turn_key(inbound.channel, inbound.source_id)
        text = STOPPED
        speaker = self._people.speaker(inbound)
        clock = _Clock(time.monotonic())
        async with conversations.turn(conversation) as scope:
            # A sub-agent's report is a turn of its conversation, under the conversation's
            # own channel (`turn_channel`), so it gets that channel's tools.
            text = await self._runtime.agent.run(
                turn.session_id,
                turn.text,
                turn.turn_channel,
                llm=await conversations.llm(conversation),
                extra_tools=self._tools.for_turn(TurnScope.of(turn, files, speaker)),
                turn_id=key,
                attachments=turn.attachments,
                purpose=PURPOSES.get(turn.kind),
                on_event=self._partials(inbound, clock),
                asked_from=inbound,  # an approval question goes where it came from
                person=speaker.person,
                memory_of=speaker.memory_of,
            )
        if scope.cancelled_caught:
            with anyio.CancelScope(shield=True):
                await self._stopped(turn.session_id, turn.text, key)
            return STOPPED
        if self._timings is not None:
            await self._timings.record(turn.session_id, *clock.took(time.monotonic()))
        if files is None:
            return Reply(text)
        if self._voice is None:
            return Reply(text, files.files)
        # The spoken answer follows what the turn attached (a failure: no voice note).
        return Reply(text, files.files + await self._voice.notes(turn, text, speaker.person))

    def _partials(self, inbound: Inbound, clock: _Clock) -> OnEvent | None:
        """The answer's text as it streams, for a channel that shows it (Matrix edits); the
        reply itself is still delivered once, through the router's outbox."""
        channel = self._streams.get(inbound.channel)
        if channel is None or inbound.kind is not InboundKind.MESSAGE:
            return None
        sink = channel.partials(inbound)
        if sink is None:
            return None
        parts: list[str] = []

        async def on_event(event: LLMEvent) -> None:
            if isinstance(event, TextDelta):
                if clock.first_token is None:
                    clock.first_token = time.monotonic()
                parts.append(event.text)
                await sink.text("".join(parts))
            elif isinstance(event, (ToolCallsReady, StreamRestart)):
                parts.clear()  # that text was not the answer, or was void

        return on_event

    async def _stopped(self, session: SessionId, text: str, key: str) -> None:
        """The history of a stopped turn: the user message, the steps the journal shows (a
        tool call in flight is there as started without a result: interrupted), the note."""
        journal = self._runtime.journal
        replay = await journal.load(key) if journal is not None else None
        steps = replay.done_steps() if replay is not None else []
        done = f" Steps taken before the stop: {', '.join(steps)}." if steps else ""
        ts = now_iso()
        await self._runtime.memory.persist_turn(
            session,
            [
                Message(role="user", content=text, ts=ts, turn=key),
                Message(role="assistant", content=STOPPED + done, ts=ts),
            ],
        )
