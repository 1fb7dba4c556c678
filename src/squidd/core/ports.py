"""The ports: small protocols through which the core talks to the outside.

Each one is implemented by an adapter (`squidd.llm`, `squidd.store`, `squidd.channels`,
`squidd.tools`) and by simple doubles in the tests. Keep them small: a port that grows a
dozen methods is a sign that logic leaked out of the core.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

from anyio.abc import TaskStatus

from squidd.core.cron import CronJob
from squidd.core.journal import Replay
from squidd.core.models import (
    Attachment,
    AttachmentKind,
    ChannelName,
    HistoryHit,
    HistoryWindow,
    Inbound,
    LLMEvent,
    Message,
    Outbound,
    PendingReply,
    SessionId,
    SourceId,
    ToolCall,
    ToolDefinition,
    ToolResult,
    TurnReads,
)
from squidd.core.poison import PoisonGuard


class LLMPort(Protocol):
    """A chat model that streams its answer.

    `chat` yields `TextDelta`s in order, then at most one `ToolCallsReady`; a `StreamRestart`
    means everything yielded before it is void (a fallback model starts over). Failures
    after retries raise `squidd.errors.LLMError`.
    """

    def chat(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> AsyncIterator[LLMEvent]: ...


class Tool(Protocol):
    """A function the model may call. `execute` gets the decoded JSON arguments."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult: ...


class ResultStore(Protocol):
    """Keeps the whole text of a tool result that enters the history cut."""

    async def save(self, session: str, call_id: str, text: str) -> str:
        """Store `text`; return the name `read_file` reads it by."""
        ...


class ToolPolicy(Protocol):
    """Decides which tools a turn may see, by tool name, channel and session."""

    def allows(self, tool: str, channel: str, session: SessionId) -> bool: ...


class MemoryStore(Protocol):
    """Durable memory of every session (the memory port of the design documents)."""

    async def append_messages(self, session_id: SessionId, messages: Sequence[Message]) -> None:
        """Append one turn's messages at once, as whole lines, atomically per line."""
        ...

    async def load_window(self, session_id: SessionId) -> HistoryWindow:
        """The cursor and the messages after it; cost bounded by that window, not the file."""
        ...

    async def load_consolidated_cursor(self, session_id: SessionId) -> int: ...

    async def save_consolidated_cursor(self, session_id: SessionId, cursor: int) -> None: ...

    async def load_global_memory(self, person: str | None = None) -> str:
        """MEMORY.md: the shared one, or `person`'s own (memory per person)."""
        ...

    async def save_global_memory(self, content: str, person: str | None = None) -> None: ...

    async def load_session_summary(self, session_id: SessionId) -> str: ...

    async def save_session_summary(self, session_id: SessionId, content: str) -> None: ...

    async def search_history(
        self, session_id: SessionId, query: str, *, limit: int
    ) -> list[HistoryHit]: ...


class TurnReader(Protocol):
    """Reads what a turn needs before its first model call (`TurnReads`), all at once."""

    async def read(self, session_id: SessionId, memory_of: str | None) -> TurnReads: ...


class ChannelState(StrEnum):
    STARTING = "starting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    STOPPED = "stopped"


class Inbox(Protocol):
    """Where a channel's receive loop hands what arrives, and reports how it is doing.

    `poison` is the router's attempt counter and dead-letter folder (core/poison.py), for a
    channel loop that retries on its own (the Matrix queue of events waiting for their keys):
    the same rule and the same folder as the router's.
    """

    async def put(self, message: Inbound) -> None: ...

    def report(self, state: ChannelState, detail: str = "") -> None: ...

    @property
    def poison(self) -> PoisonGuard: ...


HandOn = Callable[[Inbound], Awaitable[None]]
"""The rest of the pipeline after a stage: what a stage calls to hand a message on."""


Later = Callable[[Callable[[], Awaitable[None]]], None]
"""Start a stage's waiting work in the pipeline's task group."""


class Stage(Protocol):
    """One step of the pipeline between a channel and the session queue
    (gateway/pipeline.py, its order set in gateway/build.py).

    `take` looks at a message and either hands it on through `then` (as it is or changed,
    at once or later, several merged into one) or keeps it (an approval's answer, taken and
    acknowledged there). A stage that hands on later runs that in `later` (the pipeline's
    task group, which lives as long as the daemon, not as one connection of its channel).
    """

    async def take(self, message: Inbound, then: HandOn, later: Later) -> None: ...


@runtime_checkable
class HasStages(Protocol):
    """A channel with stages of its own in the pipeline (Matrix: a thread's root text)."""

    def stages(self) -> Sequence[Stage]: ...


@runtime_checkable
class HasQuietWindow(Protocol):
    """A channel whose quick messages of one conversation are answered as one (bursts):
    the seconds without a new message that end a burst; None where nothing is merged."""

    def quiet_window_s(self) -> float | None: ...


class Channel(Protocol):
    """A messaging channel: a receive loop and a way to send.

    `run` connects, calls `task_status.started()` once it is receiving, then delivers every
    inbound message to `inbox` until cancelled. It raises `TransientError` for what a
    reconnect may fix and `PermanentError` for what it will not. `send` delivers one
    outbound message and raises `DeliveryError` if it could not.
    """

    @property
    def name(self) -> str: ...

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None: ...

    async def send(self, outbound: Outbound) -> None: ...


class PartialReply(Protocol):
    """Where the text of an answer goes while it is being written (`text` gets all of it so
    far, each time). It never raises; the answer itself is still delivered by `send`."""

    async def text(self, so_far: str) -> None: ...


@runtime_checkable
class StreamsReplies(Protocol):
    """A channel that can show an answer as it is written (Matrix edits): `partials` gives
    the sink for the answer to `inbound`, or None when it is not streamed there."""

    def partials(self, inbound: Inbound) -> PartialReply | None: ...


@runtime_checkable
class ShowsAnswers(Protocol):
    """A channel that shows an answer while it is written and keeps a record of it until
    it is delivered: whether an answer to `inbound` had already begun (before a restart)."""

    async def answer_begun(self, inbound: Inbound) -> bool: ...


ControlOp = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""A request the running daemon answers on its local socket (`{"op": NAME, ...}` in, a JSON
object out), e.g. the operator's confirmation of a verification."""


@runtime_checkable
class HasControlOps(Protocol):
    """A channel with operator requests of its own, by op name (`matrix.verify`)."""

    def control_ops(self) -> Mapping[str, ControlOp]: ...


class HandledLog(Protocol):
    """The persisted record of (channel, source id) pairs that are done: the reply was
    delivered, or (`failed`) it was refused for good."""

    async def contains(self, channel: ChannelName, source_id: SourceId) -> bool: ...

    async def failed(self, channel: ChannelName, source_id: SourceId) -> bool: ...

    async def add(
        self, channel: ChannelName, source_id: SourceId, *, failed: bool = False
    ) -> None: ...


class Outbox(Protocol):
    """Finished replies waiting for delivery, keyed by the inbound's channel and source id."""

    async def get(self, channel: ChannelName, source_id: SourceId) -> PendingReply | None: ...

    async def put(self, channel: ChannelName, source_id: SourceId, reply: PendingReply) -> None: ...

    async def remove(self, channel: ChannelName, source_id: SourceId) -> None: ...


class TurnJournal(Protocol):
    """Records of the turns in flight that asked for tools, keyed by the turn key of
    core/journal.py; each record is durable when the call returns."""

    async def load(self, turn: str) -> Replay | None: ...

    async def holds(self, turn: str) -> bool:
        """Whether the turn recorded anything (without reading it)."""
        ...

    async def answer(
        self, turn: str, session: str, text: str, calls: Sequence[ToolCall]
    ) -> None: ...

    async def started(self, turn: str, call: ToolCall, *, durable: bool = True) -> None:
        """Record a call's start; `durable` (a call that must not run twice) makes it safe
        from a power loss before the call runs, else it is written as the next durable
        record is (a call that may run again is run again when its start was lost)."""
        ...

    async def result(
        self, turn: str, call_id: str, content: str, *, durable: bool = True
    ) -> None: ...

    async def remove(self, turn: str) -> None: ...


class PromptSource(Protocol):
    """The base system prompt (from the workspace files); cheap to call on every turn."""

    async def system_prompt(self) -> str: ...

    def invalidate(self) -> None:
        """Forget anything cached, so the next call re-reads its sources (SIGHUP)."""
        ...


class Clock(Protocol):
    """Wall-clock time for schedules. `sleep_until` returns once `now() >= when`."""

    def now(self) -> datetime: ...

    async def sleep_until(self, when: datetime) -> None: ...


class JobStore(Protocol):
    """Where the cron jobs live (the daemon, the agent tools and `squidd cron` share it)."""

    async def load(self) -> list[CronJob]:
        """All jobs; raises StorageError if the file is unreadable (never rewritten then)."""
        ...

    async def modify(self, change: Callable[[list[CronJob]], list[CronJob]]) -> list[CronJob]:
        """Read, change and write back atomically under a lock; returns the new list."""
        ...

    async def version(self) -> object:
        """Changes whenever the stored jobs changed (cheap; checked every poll)."""
        ...


@dataclass(frozen=True, slots=True)
class AttachmentContent:
    """What the model gets for a message's attachments.

    `text` is added to the user message for this turn (extracted text, transcripts, notes);
    `kept` is the part of it the history keeps (transcripts and short notes, never a
    file's extracted text: the history stores references); `images` are `data:` URLs.
    """

    text: str = ""
    kept: str = ""
    images: tuple[str, ...] = ()


class AttachmentReader(Protocol):
    """Turns attachment references into content for the model (images, text, transcripts)."""

    async def read(self, attachments: Sequence[Attachment]) -> AttachmentContent: ...


class Transcriber(Protocol):
    """Speech to text (an OpenAI-compatible `/audio/transcriptions` endpoint)."""

    async def transcribe(self, path: Path, mime: str) -> str:
        """The transcript; raises `TranscriptionError` when there is none."""
        ...


class IncomingFile(TypedDict):
    """A file that comes with a message: its kind, name and type as the sender gave them,
    its bytes as they arrive, and the most of them to keep."""

    kind: AttachmentKind
    name: str
    mime: str
    chunks: AsyncIterable[bytes]
    max_bytes: int


class MediaSink(Protocol):
    """Where a channel streams the files that come with messages (the media store)."""

    async def save(self, session_id: str, **file: Unpack[IncomingFile]) -> Attachment: ...
