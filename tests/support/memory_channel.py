"""An in-memory channel for the daemon's tests: messages are injected by the test, replies
are collected in a list. It follows the `Channel` protocol exactly like Matrix and email do
(started once receiving, TransientError to be restarted, DeliveryError on a failed send)."""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskStatus

from squidd.core.models import Attachment, Inbound, Outbound, SessionId
from squidd.core.ports import ChannelState, Inbox
from squidd.core.reply_files import FileRef
from squidd.errors import DeliveryError, DeliveryRefusedError, PermanentError, TransientError


@dataclass
class Sent:
    target: str
    text: str
    session_id: str
    in_reply_to: str | None
    files: tuple[FileRef, ...] = ()


@dataclass
class MemoryChannel:
    """`inject()` a message; replies land in `sent`; acknowledged ids in `acked`.

    `fail_runs` makes the next N `run` calls raise TransientError (after `started()` when
    `fail_after_start`); `fail_sends` makes the next N sends raise DeliveryError;
    `permanent` makes `run` raise PermanentError; a send to a target in `refused` raises
    DeliveryRefusedError (refused for good, like an SMTP 550 or a Matrix M_FORBIDDEN).
    """

    name: str = "memory"
    fail_runs: int = 0
    fail_after_start: bool = False
    fail_sends: int = 0
    permanent: str | None = None
    refused: set[str] = field(default_factory=set)
    sent: list[Sent] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    runs: int = 0
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self._pending: deque[Inbound] = deque()
        self._changed = anyio.Event()

    def inject(
        self,
        text: str,
        *,
        session: str = "s1",
        source_id: str | None = None,
        sender: str = "u",
        attachments: tuple[Attachment, ...] = (),
        group: bool = False,
        recipients: tuple[str, ...] = (),
        agent: str = "",
    ) -> Inbound:
        sid = source_id or f"{self.name}-{next(self._ids)}"

        async def ack() -> None:
            self.acked.append(sid)
            self._notify()

        inbound = Inbound(
            channel=self.name,
            source_id=sid,
            session_id=SessionId(session),
            sender=sender,
            text=text,
            ack=ack,
            attachments=attachments,
            group=group,
            recipients=recipients,
            agent=agent,
        )
        self._pending.append(inbound)
        self._notify()
        return inbound

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, count: int, *, what: str = "sent") -> None:
        """Wait until `sent` (or `acked`) holds at least `count` entries."""
        while len(getattr(self, what)) < count:
            await self._changed.wait()

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        self.runs += 1
        if self.permanent:
            raise PermanentError(self.permanent)
        if self.fail_runs and not self.fail_after_start:
            self.fail_runs -= 1
            raise TransientError(f"{self.name} connection refused")
        task_status.started()
        if self.fail_runs:
            self.fail_runs -= 1
            raise TransientError(f"{self.name} connection dropped")
        inbox.report(ChannelState.CONNECTED, "in memory")
        while True:
            while self._pending:
                # Removed only once the router queued it, as a real source would redeliver.
                await inbox.put(self._pending[0])
                self._pending.popleft()
            await self._changed.wait()

    async def send(self, outbound: Outbound) -> None:
        if outbound.target in self.refused:
            raise DeliveryRefusedError(f"{self.name}: {outbound.target} refuses (scripted)")
        if self.fail_sends:
            self.fail_sends -= 1
            raise DeliveryError(f"{self.name} send failed (scripted)")
        self.sent.append(
            Sent(
                target=outbound.target,
                text=outbound.text,
                session_id=outbound.session_id,
                in_reply_to=outbound.in_reply_to.source_id if outbound.in_reply_to else None,
                files=outbound.files,
            )
        )
        self._notify()
