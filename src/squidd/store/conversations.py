"""Which session a conversation is in now, and the model a person chose for it.

`<data dir>/conversations.json`: `{"<conversation>": {"generation": n, "model": "name"}}`.
A conversation is what a channel names as the session of a message (a Matrix room, an
email sender, a terminal session name). `/new` starts its next generation: the session id
becomes `<conversation>#<n>`, a session no file exists for yet, so its history, summary and
consolidation cursor start empty while the old session's files stay on disk as they were
(nothing is deleted or rewritten: the history files are append-only). Generation 0 is the
conversation's own id, so data dirs from before `/new` read on unchanged. `/model` keeps
the person's model choice here, per conversation.

The file is small (one entry per conversation that used `/new` or `/model`), written with an
atomic rename, and the daemon is its only writer, so it is read once and kept in memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import structlog

from squidd.core.models import SessionId
from squidd.errors import StorageError
from squidd.fs import atomic_write_text, read_text_or_empty
from squidd.store.records import Codec

__all__ = ["ConversationsFile", "session_of"]

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation's entry: its generation (`/new`) and the model chosen (`/model`)."""

    generation: int = 0
    model: str | None = None


CONVERSATION: Codec[Conversation] = Codec(Conversation, omit_defaults=True)
"""An entry (a field at its default left out, as entries always were)."""


def _entry(name: str, value: object) -> Conversation | None:
    try:
        return CONVERSATION.load(value)
    except ValueError:
        log.warning("conversation_entry_unreadable", conversation=name)
        return None


def session_of(conversation: str, generation: int) -> SessionId:
    """The session id of a conversation's generation (0: the conversation's own id)."""
    return SessionId(conversation if generation <= 0 else f"{conversation}#{generation}")


class ConversationsFile:
    """Generations and model choices of conversations, on disk."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / "conversations.json"
        self._entries: dict[str, Conversation] | None = None
        self._lock = anyio.Lock()

    async def _load(self) -> dict[str, Conversation]:
        if self._entries is None:
            try:
                raw = await anyio.to_thread.run_sync(read_text_or_empty, self._path)
            except OSError as exc:
                raise StorageError(f"cannot read {self._path.name}: {exc.strerror}") from exc
            try:
                data = json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                raise StorageError(f"{self._path.name} is not valid JSON") from exc
            entries = (
                {str(k): _entry(str(k), v) for k, v in data.items()}
                if isinstance(data, dict)
                else {}
            )
            self._entries = {k: v for k, v in entries.items() if v is not None}
        return self._entries

    async def _change(self, conversation: str, **changes: Any) -> Conversation:
        async with self._lock:
            entries = dict(await self._load())
            entries[conversation] = replace(entries.get(conversation, Conversation()), **changes)
            data = {name: CONVERSATION.dump(entry) for name, entry in entries.items()}
            text = json.dumps(data, ensure_ascii=False, sort_keys=True)
            try:
                await anyio.to_thread.run_sync(atomic_write_text, self._path, text)
            except OSError as exc:
                raise StorageError(f"cannot write {self._path.name}: {exc.strerror}") from exc
            self._entries = entries
            return entries[conversation]

    async def generation(self, conversation: str) -> int:
        value = (await self._load()).get(conversation, Conversation()).generation
        return max(value, 0)

    async def session(self, conversation: str) -> SessionId:
        """The session the conversation's next turn runs in."""
        return session_of(conversation, await self.generation(conversation))

    async def new(self, conversation: str) -> SessionId:
        """Start the conversation's next generation; its new (empty) session."""
        entry = await self._change(conversation, generation=await self.generation(conversation) + 1)
        return session_of(conversation, entry.generation)

    async def model(self, conversation: str) -> str | None:
        return (await self._load()).get(conversation, Conversation()).model or None

    async def set_model(self, conversation: str, model: str | None) -> None:
        """Keep `model` as the conversation's choice; None: back to the configured one."""
        await self._change(conversation, model=model)
