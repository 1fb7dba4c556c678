"""The API channel: HTTP requests in (through the router like any message), replies out.

A request becomes an `Inbound` of session `api:<conversation>`; its handler waits for the
router's `send` (the reply) and `ack` (the reply is recorded as delivered). `send` first
stores the reply under the request's `Idempotency-Key` (durably), then wakes the handler,
so a client that went away mid-turn, or a daemon killed after the turn, still has the
reply for a retry with the same key: the retry finds it stored (no second turn), joins the
request still running, or, after a restart, submits the same source id again, which the
router answers from its outbox or the turn journal. A disconnecting client cancels
nothing: the turn belongs to the router, not to the HTTP handler. A request submitted
with `drafts` (the dashboard's chat) also gets the answer as it is written (`partials`,
the channel's `StreamsReplies`); the OpenAI routes never ask for them.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable

import anyio
import structlog
from aiohttp import web
from anyio.abc import TaskStatus

from squidd.channels.api.keys import ApiKeys
from squidd.channels.api.limits import RateLimit
from squidd.channels.api.requests import Pending, ReplyStore, StoredAnswer
from squidd.channels.api.wire import BadRequest
from squidd.config.api import ApiSettings
from squidd.core.models import ChannelName, Inbound, Outbound, SessionId, SourceId
from squidd.core.ports import ChannelState, Inbox, PartialReply
from squidd.errors import DeliveryError, DeliveryRefusedError, StorageError, TransientError

log = structlog.get_logger()

Pages = Callable[[web.Application], None]
"""More routes on the API's listener (the dashboard's), added to its application."""
SWEEP_S = 3600.0
SHUTDOWN_S = 1.0  # handlers still waiting when the channel stops are cut after this


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


class _Drafts:
    """A `PartialReply` into one pending request (the dashboard's chat shows it)."""

    def __init__(self, pending: Pending) -> None:
        self._pending = pending

    async def text(self, so_far: str) -> None:
        self._pending.write(so_far)


class ApiChannel:
    """`[api]`: the OpenAI-compatible endpoint as a `Channel`."""

    def __init__(
        self,
        settings: ApiSettings,
        keys: ApiKeys,
        replies: ReplyStore,
        *,
        pages: Pages | None = None,
        agents: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.agents = agents
        """The daemon's agents (none: one agent); a request's `model` names one."""
        self.keys = keys
        self.replies = replies
        self.rate = RateLimit(settings.requests_per_minute)
        self._pending: dict[str, Pending] = {}
        self._inbox: Inbox | None = None
        self.port = 0
        # More routes on this listener: the web dashboard, from the composition root.
        self.pages = pages

    @property
    def name(self) -> str:
        return "api"

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        from squidd.channels.api.server import build_app  # aiohttp's app, routes and checks

        self._inbox = inbox
        inbox.report(ChannelState.STARTING)
        runner = web.AppRunner(
            build_app(self), handle_signals=False, shutdown_timeout=SHUTDOWN_S, access_log=None
        )
        await runner.setup()
        try:
            site = web.TCPSite(
                runner, self.settings.host, self.settings.port, backlog=1024, reuse_address=True
            )
            try:
                await site.start()
            except OSError as exc:
                raise TransientError(
                    f"cannot listen on {self.settings.listen}: {exc.strerror or exc}"
                ) from None
            self.port = int(runner.addresses[0][1])  # the bound one when listen asks for 0
            inbox.report(ChannelState.CONNECTED, f"listening on {self.settings.host}:{self.port}")
            log.info("api_listening", host=self.settings.host, port=self.port)
            task_status.started()
            while True:
                swept = await self.replies.sweep()
                if swept:
                    log.info("api_replies_expired", count=swept)
                await anyio.sleep(SWEEP_S)
        finally:
            with anyio.CancelScope(shield=True):
                await runner.cleanup()

    async def submit(
        self,
        key_id: str,
        conversation: str,
        text: str,
        idempotency_key: str,
        *,
        drafts: bool = False,
        model: str = "",
    ) -> Pending | StoredAnswer:
        """The request's reply so far: stored (a retry), joined (still running) or new;
        with `drafts`, the answer is also written into it as it streams (`partials`). A
        `model` naming an agent sends it to that agent (its conversations its own)."""
        agent = model if model in self.agents else ""
        source = (
            f"idem-{_digest(key_id, idempotency_key)[:32]}"
            if idempotency_key
            else f"req-{uuid.uuid4().hex}"
        )
        if idempotency_key:
            if source in self._pending:
                return self._pending[source]
            stored = await self.replies.get(key_id, idempotency_key)
            if stored is not None:
                return stored
        if source in self._pending:
            return self._pending[source]
        if self._inbox is None:
            raise BadRequest("the API is starting", status=503, code="unavailable")
        if len(self._pending) >= self.settings.max_in_flight:
            raise BadRequest("too many requests in flight", status=429, code="rate_limited")
        model_name = agent or self.settings.model
        pending = Pending(f"chatcmpl-{_digest(source)[:24]}", model_name, drafts=drafts)
        self._pending[source] = pending

        async def ack() -> None:
            self._pending.pop(source, None)
            pending.finish()

        inbound = Inbound(
            channel=ChannelName(self.name),
            source_id=SourceId(source),
            session_id=SessionId(f"api:{agent}:{conversation}" if agent else f"api:{conversation}"),
            sender=conversation,
            agent=agent,
            text=text,
            meta={
                "key_id": key_id,
                "idempotency_key": idempotency_key,
                "completion_id": pending.completion_id,
            },
            ack=ack,
        )
        try:
            await self._inbox.put(inbound)
        except BaseException:
            self._pending.pop(source, None)
            raise
        return pending

    def partials(self, inbound: Inbound) -> PartialReply | None:
        """The answer to a request that asked for drafts, written into it as it streams."""
        pending = self._pending.get(inbound.source_id)
        if inbound.channel != self.name or pending is None or not pending.drafts:
            return None
        return _Drafts(pending)

    async def send(self, outbound: Outbound) -> None:
        inbound = outbound.in_reply_to
        if inbound is None or inbound.channel != self.name:
            raise DeliveryRefusedError(
                "the API channel answers requests; it cannot start a conversation"
            )
        text = outbound.text
        if outbound.files:
            names = ", ".join(f.name for f in outbound.files)
            text += f"\n\n(files are not sent over the API: {names})"
        meta = inbound.meta
        pending = self._pending.get(inbound.source_id)
        # An approval question comes before the reply: the stored answer holds both.
        whole = "\n\n".join([*pending.parts, text]) if pending is not None else text
        idempotency_key = str(meta.get("idempotency_key", ""))
        if idempotency_key:
            try:
                await self.replies.put(
                    str(meta.get("key_id", "")),
                    idempotency_key,
                    completion_id=str(meta.get("completion_id", "")),
                    model=self.settings.model,
                    text=whole,
                )
            except StorageError as exc:
                raise DeliveryError(str(exc)) from exc
        if pending is not None:
            pending.add(text)
