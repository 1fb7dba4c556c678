"""A request as the API channel and its HTTP side both see it: `Pending` while the router
has it, a `StoredAnswer` once its reply is kept under its Idempotency-Key, and the
`ReplyStore` that keeps them (store/idempotency.py). A leaf: channel.py and server.py both
import it, neither imports the other's module at import time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import anyio

__all__ = ["Pending", "ReplyStore", "StoredAnswer"]


class StoredAnswer(Protocol):
    @property
    def completion_id(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def created(self) -> float: ...


class ReplyStore(Protocol):
    """Replies by (key id, idempotency key), durable when `put` returns (store/idempotency)."""

    async def get(self, key_id: str, idempotency_key: str) -> StoredAnswer | None: ...

    async def put(
        self, key_id: str, idempotency_key: str, *, completion_id: str, model: str, text: str
    ) -> None: ...

    async def sweep(self) -> int: ...


@dataclass
class Pending:
    """A request in the router's hands. `parts` are the messages sent for it so far (an
    approval question, then the reply); `changed` is set when one arrives or it is acked
    (then replaced by a fresh event), `done` once it is acked."""

    completion_id: str
    model: str
    created: float = field(default_factory=time.time)
    parts: list[str] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    drafts: bool = False
    """The requester shows the answer as it is written (the dashboard's chat)."""
    draft: str = ""
    """The answer written so far, before it is sent as a part (only with `drafts`)."""

    @property
    def text(self) -> str:
        return "\n\n".join(self.parts)

    def add(self, text: str) -> None:
        self.parts.append(text)
        self._wake()

    def write(self, so_far: str) -> None:
        self.draft = so_far
        self._wake()

    def finish(self) -> None:
        self.done.set()
        self._wake()

    def _wake(self) -> None:
        changed, self.changed = self.changed, anyio.Event()
        changed.set()
