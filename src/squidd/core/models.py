"""Typed values that travel between the core and the adapters.

Everything here is immutable. `Message` is what the history file stores and what the
LLM port consumes; `Inbound`/`Outbound` are what channels hand to the router and get back.
What the LLM port streams is in `core/llm_events.py` (imported from here too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, NewType

from squidd.core.llm_events import LLMEvent as LLMEvent
from squidd.core.llm_events import StreamRestart as StreamRestart
from squidd.core.llm_events import TextDelta as TextDelta
from squidd.core.llm_events import ToolCall as ToolCall
from squidd.core.llm_events import ToolCallsReady as ToolCallsReady
from squidd.core.llm_events import Usage as Usage
from squidd.core.reply_files import FileRef
from squidd.text import clean_text

SessionId = NewType("SessionId", str)
"""A conversation: one Matrix room, one email sender, one cron job, the terminal."""

ChannelName = NewType("ChannelName", str)
"""A channel as the router, the outbox and the handled record name it: `matrix`, `email`,
`terminal`, `cron`, ... (a `Destination`'s part before the colon); an agent's own Matrix
account is `matrix-<agent>`."""


def channel_kind(name: str) -> str:
    """The kind of a channel by its name: `matrix-planner` (an agent's own Matrix account)
    -> `matrix`; a name without a `-` is its own kind."""
    return name.partition("-")[0]


SourceId = NewType("SourceId", str)
"""An inbound message's id at its source, stable across redeliveries (a Matrix event id, an
email Message-ID, a cron run id): what the handled record and the outbox are keyed by."""

Role = Literal["system", "user", "assistant", "tool"]


AttachmentKind = Literal["image", "file", "audio", "video"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with a message: a reference to it, never its bytes.

    `path` is where the media store kept it (under `<data dir>/media/<session>/`, named by
    its content hash), None when it was not kept (over the size cap, a type not allowed);
    `note` then says why ("too large", "type not allowed"). `name` is the sender's file name,
    cleaned for display only: it never becomes a path. History stores exactly these fields.
    """

    kind: AttachmentKind
    name: str
    mime: str
    size: int
    sha256: str = ""
    path: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of a conversation as the model sees it (and as the JSONL history stores it)."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    ts: str | None = None
    turn: str | None = None
    """On a turn's user message: the id of the inbound message it answers (channel and
    source id), so a redelivery can find a turn that already finished."""
    attachments: tuple[Attachment, ...] = ()
    """On a user message: the files that came with it, as references (stored)."""
    by: str | None = None
    """On a user message: the person who said it, when the turn knew (stored, never sent
    to the model): whose conversations a person's history search may read."""
    images: tuple[str, ...] = field(default=(), compare=False)
    """On the current user message only: images as `data:` URLs for the model (never stored)."""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What the model is told about a tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns; `is_error` results are shown to the model as failures."""

    content: str
    is_error: bool = False


# --- what the memory store returns ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """What a turn needs from a session's history.

    `cursor` is the number of messages already folded into the summary; `messages` are the
    ones after it, in order. The total history length is `cursor + len(messages)`.
    """

    cursor: int
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class TurnReads:
    """What a turn reads before it asks the model, read together (the daemon does it in
    one hand-off to a worker thread): the session's window, MEMORY.md (the shared one or the
    person's own), the session's summary, the base system prompt and the parts every turn's
    prompt adds under their own cap (the skills index)."""

    window: HistoryWindow
    global_memory: str
    summary: str
    prompt: str
    parts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HistoryHit:
    """One search result: where it was found and a short snippet around the match."""

    source: str
    index: int
    role: str
    ts: str | None
    snippet: str
    session: str | None = None
    """Set when the search spanned several sessions: the session the hit belongs to."""


# --- what channels exchange with the router --------------------------------------------------


def utcnow() -> datetime:
    return datetime.now(UTC)


AckHook = Callable[[], Awaitable[None]]
UndeliverableHook = Callable[[str], Awaitable[None]]
"""Called with the reason when the reply to a message was refused for good."""


async def _no_ack() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a reply goes: a channel name and an address on it."""

    channel: ChannelName
    target: str

    @classmethod
    def parse(cls, text: str) -> Destination | None:
        """`"matrix:!room:example.org"` -> Destination("matrix", "!room:example.org").

        The part before the first colon names the channel; the rest is its address. An empty
        string, or a bare channel name with no address ("terminal"), delivers nowhere.
        """
        channel, sep, target = text.strip().partition(":")
        if not sep or not channel or not target:
            return None
        return cls(ChannelName(channel), target)

    def __str__(self) -> str:
        return f"{self.channel}:{self.target}"


class InboundKind(StrEnum):
    """What an inbound is, which decides how the gateway runs its turn.

    A channel's message is a `MESSAGE`; the others are made by the gateway itself: a cron
    job's firing, a heartbeat, a background sub-agent's task and its report to the
    conversation (see `squidd.core.runs`), and the owner's daily-cap notice. A `REACTION` is a
    person's reaction that may answer an approval question (a Matrix ✅ / ♾️ / ❌): the
    pipeline's approval stage takes it (gateway/approval_answers.py), it is never a turn.
    """

    MESSAGE = "message"
    CRON = "cron"
    HEARTBEAT = "heartbeat"
    SUBAGENT = "subagent"
    SUBAGENT_REPORT = "subagent_report"
    NOTICE = "notice"
    REACTION = "reaction"


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message that arrived on a channel (or a scheduled run fired by the gateway).

    `source_id` is stable across redeliveries (Matrix event id, email Message-ID, cron run id):
    the router records it once the reply was delivered, so a redelivery is not answered twice.
    `ack` tells the source the message is done (IMAP \\Seen, Matrix sync position); the router
    calls it only after the reply was delivered. When the reply was refused for good (an
    unknown recipient), the router calls `on_undeliverable(reason)` instead, so the source can
    mark the message as failed rather than answered (email flags it and leaves it unread); a
    channel without such a notion leaves it None and gets `ack`.

    Routing travels in typed fields the router and the gateway read: `reply_to` (where the
    answer goes; None: the sender, on the same channel), `quiet_reply` (a reply equal to it is
    not delivered: the heartbeat's HEARTBEAT_OK), `thread_root` (the thread the answer joins)
    and `subject` (the conversation's subject, for channels that have one). `meta` is private
    to the channel that made it (email References, Matrix room flags); nothing else reads it.
    `attachments`: the files that came with it, as references into the media store.

    `kind`: what it is (`InboundKind`); `conversation_channel`: the channel whose conversation
    a gateway-made run belongs to (a sub-agent's task and report carry their root's), so the
    turn gets that channel's tools; empty: `channel`. `record_id`: the router's record id when
    not `source_id` (a parked message sent again keeps its source id under a new record).
    `command`: where a chat command is read from when not `text` (a mail's subject or first
    line, a group message without the bot's mention); empty: `text`. `group`: see below.
    """

    channel: ChannelName
    source_id: SourceId
    session_id: SessionId
    sender: str
    text: str
    reply_to: Destination | None = None
    quiet_reply: str | None = None
    thread_root: str | None = None
    subject: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)
    ack: AckHook = _no_ack
    received_at: datetime = field(default_factory=utcnow)
    on_undeliverable: UndeliverableHook | None = None
    attachments: tuple[Attachment, ...] = ()
    kind: InboundKind = InboundKind.MESSAGE
    conversation_channel: str = ""
    record_id: str = ""
    command: str = ""
    group: bool = False
    """More people than the sender read the answer (a Matrix room of more than two): with
    memory per person, such a turn reads and writes only the shared memory."""
    agent: str = ""
    """The agent that answers it when the message names one (an API request's model, a
    cron job's, a sub-agent's run); empty: the routing rules decide (gateway/agents.py)."""
    recipients: tuple[str, ...] = ()
    """The addresses it was sent to, where one account has several (a mail's To and Cc,
    plus-addressing): what routes it to an agent."""

    @property
    def record(self) -> SourceId:
        """The id the router's records (handled, outbox, attempts) keep this message under."""
        return SourceId(self.record_id) if self.record_id else self.source_id

    @property
    def turn_channel(self) -> str:
        """The channel the turn runs under (its tools, the policy): see `conversation_channel`."""
        return self.conversation_channel or self.channel

    def cleaned(self) -> Inbound:
        """This message with valid text only (`squidd.text.clean_text`) in every string that
        reaches the prompt, the history or the stores; every channel's inbox applies it."""
        meta = {k: clean_text(v) if isinstance(v, str) else v for k, v in self.meta.items()}
        reply_to = self.reply_to
        if reply_to is not None:
            reply_to = Destination(
                ChannelName(clean_text(reply_to.channel)), clean_text(reply_to.target)
            )
        thread_root = self.thread_root
        return dataclasses.replace(
            self,
            source_id=SourceId(clean_text(self.source_id)),
            session_id=SessionId(clean_text(self.session_id)),
            sender=clean_text(self.sender),
            text=clean_text(self.text),
            command=clean_text(self.command),
            subject=clean_text(self.subject),
            thread_root=None if thread_root is None else clean_text(thread_root),
            reply_to=reply_to,
            meta=meta,
            attachments=tuple(
                dataclasses.replace(a, name=clean_text(a.name), mime=clean_text(a.mime))
                for a in self.attachments
            ),
        )

    @property
    def destination(self) -> Destination | None:
        """Where the answer goes: `reply_to`, else the sender on this channel, else nowhere."""
        if self.reply_to is not None:
            return self.reply_to
        if not self.sender:
            return None
        return Destination(self.channel, self.sender)


@dataclass(frozen=True, slots=True)
class Outbound:
    """A reply (or a scheduled message) for a channel to deliver.

    `target`: the channel-level address (room id, email address); `in_reply_to`: the inbound
    it answers, if any, for threading; `subject` when it starts a conversation; `files`;
    `reactions`: keys a channel that has reactions puts on the message itself, to be picked
    (an approval prompt's ✅ ♾️ ❌ on Matrix); other channels leave them out.
    """

    channel: ChannelName
    target: str
    text: str
    session_id: SessionId
    in_reply_to: Inbound | None = None
    subject: str = ""
    files: tuple[FileRef, ...] = ()
    reactions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PendingReply:
    """A finished reply not yet delivered, as the outbox keeps it (files as references)."""

    channel: ChannelName
    target: str
    text: str
    session_id: SessionId
    subject: str = ""
    files: tuple[FileRef, ...] = ()
