"""Scheduled runs: what the gateway hands the router on its own, kept on disk until answered.

A `PendingRun` is a cron job's firing, a heartbeat, a background sub-agent's task or its
report to the conversation. Its `kind` says which (and names the pseudo-channel the run
arrives on, so the router's handled record and the runs directory keep the names they
always had); `conversation_channel` is the channel of the conversation a sub-agent's run
belongs to. Its file is `store/pending_runs.py`'s (older layouts are read there).
"""

from __future__ import annotations

from dataclasses import dataclass

from squidd.core.models import (
    AckHook,
    ChannelName,
    Destination,
    Inbound,
    InboundKind,
    SessionId,
    SourceId,
)

RUN_KINDS = frozenset(
    {InboundKind.CRON, InboundKind.HEARTBEAT, InboundKind.SUBAGENT, InboundKind.SUBAGENT_REPORT}
)
"""The kinds a scheduled run can have; the others are never written to disk."""


@dataclass(frozen=True, slots=True)
class PendingRun:
    """A scheduled run handed to the router, as kept on disk until the router acknowledges it."""

    kind: InboundKind
    source_id: str
    session_id: str
    text: str
    target: str
    """Where the answer goes, as `Destination.parse` reads it; empty: nowhere."""
    quiet_reply: str | None = None
    subject: str = ""
    conversation_channel: str = ""
    """The channel of the conversation the run belongs to (a sub-agent's root); empty:
    the run's own channel."""
    agent: str = ""
    """The agent whose run it is (a cron job's, a sub-agent's); empty: the default agent."""

    def __post_init__(self) -> None:
        if self.kind not in RUN_KINDS:
            raise ValueError(f"not a scheduled run's kind: {self.kind!r}")

    @property
    def channel(self) -> str:
        """The pseudo-channel the run arrives on: its kind's name."""
        return self.kind.value

    def inbound(self, ack: AckHook) -> Inbound:
        return Inbound(
            channel=ChannelName(self.channel),
            source_id=SourceId(self.source_id),
            session_id=SessionId(self.session_id),
            sender="",
            text=self.text,
            reply_to=Destination.parse(self.target),
            quiet_reply=self.quiet_reply,
            subject=self.subject,
            ack=ack,
            kind=self.kind,
            conversation_channel=self.conversation_channel,
            agent=self.agent,
        )
