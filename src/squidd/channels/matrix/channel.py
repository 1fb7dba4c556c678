"""The Matrix `Channel`: `run` logs in and follows one connection, `send` delivers a reply.

The channel builds its parts once, each with what it needs (`__init__`): what outlives a
reconnect is `carried.Carried`, handed to each new `connection.Connection`; the parts that
need the connection of the moment (its client, policy, trust pass, signing identity) are
given the channel's `online.Online`, which answers for the connection while `run` serves
it. A message's marks (typing, 👀, ✅/❌) follow one lifecycle (`message_marks`): the
connection marks it received and settled, `send` marks it answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus
from nio import AsyncClient

from squidd.channels.matrix.carried import Carried
from squidd.channels.matrix.client import TokenRejectedError, open_client
from squidd.channels.matrix.connection import Connection
from squidd.channels.matrix.events import event_id_or_none, member_count
from squidd.channels.matrix.ids import EventId, RoomId
from squidd.channels.matrix.message_marks import MessageMarks
from squidd.channels.matrix.online import Online
from squidd.channels.matrix.own_reactions import ReactionKeys, StatusReactions
from squidd.channels.matrix.policy import CHANNEL
from squidd.channels.matrix.rate import Priority, RateBudget, bind
from squidd.channels.matrix.render import message_content
from squidd.channels.matrix.send import (
    FilesAfterEditError,
    relate,
    send_event,
    send_final_edit,
    send_reply,
)
from squidd.channels.matrix.state import MatrixFiles
from squidd.channels.matrix.stream import Pacer, ReplyStream, StreamRecords
from squidd.channels.matrix.targets import check_target, room_list
from squidd.channels.matrix.threads import ThreadRoots
from squidd.channels.matrix.typing_notices import TypingNotices
from squidd.channels.matrix.undecrypted import Undecrypted
from squidd.channels.matrix.verification.flows import Verifications
from squidd.config.matrix import MatrixSettings
from squidd.core.backoff import Backoff
from squidd.core.journal import turn_key
from squidd.core.models import ChannelName, Inbound, Outbound
from squidd.core.ports import ChannelState, ControlOp, Inbox, MediaSink, PartialReply, Stage
from squidd.errors import DeliveryError, PermanentError

log = structlog.get_logger()


class MatrixChannel:
    """The `Channel` for Matrix. Create with `create_channel(settings)`."""

    def __init__(
        self,
        settings: MatrixSettings,
        data_dir: Path,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        media: MediaSink | None = None,
        max_download_bytes: int = 8 * 1024 * 1024,
        online: Online | None = None,
        name: str = CHANNEL,
        siblings: Iterable[str] = (),
    ) -> None:
        """`name`: `matrix`, or `matrix-<agent>` for an agent's own account; `siblings`:
        the daemon's other bot accounts, never answered."""
        self._name = ChannelName(name)
        self._settings = settings
        self._files = MatrixFiles(data_dir)
        self._streams = StreamRecords(self._files.root)
        self._monotonic = monotonic
        online = self._online = online if online is not None else Online()
        self._thread_roots = ThreadRoots(lambda: online.client)
        self._marks = MessageMarks(
            TypingNotices(
                enabled=settings.typing_notice, monotonic=monotonic, client=lambda: online.client
            ),
            StatusReactions(
                enabled=settings.status_reactions,
                receipts=settings.read_receipts,
                keys=ReactionKeys(
                    settings.reaction_taken, settings.reaction_done, settings.reaction_failed
                ),
                device_trust=settings.device_trust,
                apply_trust=online.apply_trust,
            ),
        )
        self._carried = Carried(
            marks=self._marks,
            undecrypted=Undecrypted(
                wait_s=settings.decrypt_wait_s, monotonic=monotonic, channel=name
            ),
            backoff=Backoff(settings.reconnect_initial_delay_s, settings.reconnect_max_delay_s),
            verifications=Verifications(online, device_trust=settings.device_trust),
            media=media,
            max_download_bytes=max_download_bytes,
            budget=RateBudget(settings.rate_per_second, settings.rate_burst),
            channel=name,
            siblings=frozenset(siblings),
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def client(self) -> AsyncClient | None:
        """The logged-in client while `run` serves a connection, else None."""
        return self._online.client

    def stages(self) -> tuple[Stage, ...]:
        """The channel's stage in the daemon's pipeline: a thread's first message brings
        its root's text along (threads.py), read through the client of the moment."""
        return (self._thread_roots,)

    def quiet_window_s(self) -> float | None:
        """Quick messages of a room within `debounce_ms` are answered as one (bursts)."""
        debounce_ms = self._settings.debounce_ms
        return debounce_ms / 1000 if debounce_ms else None

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        inbox.report(ChannelState.STARTING, "logging in")
        await self._files.prepare()
        try:
            client = await open_client(self._settings, self._files)
        except TokenRejectedError as exc:
            inbox.report(ChannelState.FAILED, str(exc))
            raise
        bind(client, self._carried.budget)  # every send of this account spends from it
        connection = Connection(
            client, inbox, settings=self._settings, files=self._files, carried=self._carried
        )
        try:
            response, since = await connection.connect()
            with self._online.serving(connection):
                await connection.serve(response, since, task_status)
        finally:
            with anyio.CancelScope(shield=True):
                await connection.identity.close()
                await client.close()

    def control_ops(self) -> dict[str, ControlOp]:
        """What the running daemon answers for `squidd matrix verify` (status socket)."""
        flows = self._carried.verifications

        async def listing(request: Mapping[str, Any]) -> dict[str, Any]:
            return {"verifications": flows.listing()}

        async def verify(request: Mapping[str, Any]) -> dict[str, Any]:
            flow_id = request.get("id")
            return await flows.confirm(
                str(flow_id) if flow_id else None, match=request.get("match") is True
            )

        async def target(request: Mapping[str, Any]) -> dict[str, Any]:
            client = self._online.client
            if client is None:
                return {"error": "matrix is not connected yet; try again in a moment"}
            address = str(request.get("address", ""))
            return await check_target(client, address, e2ee=self._settings.e2ee, channel=self._name)

        async def rooms(request: Mapping[str, Any]) -> dict[str, Any]:
            client = self._online.client
            if client is None:
                return {"error": "matrix is not connected yet; try again in a moment"}
            return {"rooms": room_list(client)}

        prefix = self._name  # `matrix-<agent>.verify` for an agent's own account
        return {
            f"{prefix}.verifications": listing,
            f"{prefix}.verify": verify,
            f"{prefix}.check_target": target,
            f"{prefix}.rooms": rooms,
        }

    def status_details(self) -> dict[str, Any]:
        """For `squidd status`: the bot's cross-signing identity as last made sure of."""
        status = self._carried.identity.status
        return {"identity": status.as_dict()} if status is not None else {}

    async def answer_begun(self, inbound: Inbound) -> bool:
        """Whether an answer to `inbound` was streamed before a restart (its record kept)."""
        key = turn_key(inbound.channel, inbound.source_id)
        return await self._streams.get(key) is not None

    def partials(self, inbound: Inbound) -> PartialReply | None:
        """The answer to `inbound` streamed by edits (stream.py), or None where it is off."""
        client, settings, destination = self._online.client, self._settings, inbound.destination
        if client is None or inbound.channel != self._name or destination is None:
            return None
        room_id = RoomId(destination.target)
        if destination.channel != self._name or room_id not in client.rooms:
            return None
        mode = settings.room_streaming.get(room_id, settings.streaming)
        if mode is None:
            mode = "edits" if member_count(client.rooms[room_id]) <= 2 else "off"
        if mode != "edits":
            return None
        reply_to = inbound
        thread_root = event_id_or_none(inbound.thread_root)

        def render(text: str) -> dict[str, Any]:
            piece = message_content(text, settings.msgtype)
            return relate(piece, 0, reply_to, thread_root, inbound.source_id)

        async def send(content: dict[str, Any], tx_id: str) -> str:
            return await send_event(
                client,
                room_id,
                "m.room.message",
                content,
                tx_id=tx_id,
                device_trust=settings.device_trust,
                apply_trust=self._online.apply_trust,
                priority=Priority.EDIT,  # gives way: a skipped edit's text goes out later
            )

        return ReplyStream(
            key=turn_key(inbound.channel, inbound.source_id),
            room_id=room_id,
            records=self._streams,
            pacer=Pacer(settings, self._monotonic),
            render=render,
            send_first=send,
            send_edit=send,
        )

    async def send(self, outbound: Outbound) -> None:
        client = self._online.client
        if client is None:
            raise DeliveryError("matrix is not connected")
        trust = self._online.apply_trust
        reply_to = outbound.in_reply_to
        key = turn_key(reply_to.channel, reply_to.source_id) if reply_to is not None else None
        record = await self._streams.get(key) if key is not None else None
        if record is not None and outbound.reactions:
            # A question (an approval prompt) is a message of its own: the streamed message
            # stays the answer's, finished by the reply that comes once it is decided (a
            # second final edit of it would reuse the first one's transaction ids).
            record = None
        if key is not None and record is not None and record.room_id == outbound.target:
            try:
                await send_final_edit(
                    client,
                    outbound,
                    record.event_id,
                    key,
                    settings=self._settings,
                    apply_trust=trust,
                )
            except FilesAfterEditError as exc:
                # The text is shown; its record stays, so a retry edits again (the same
                # transaction ids: no new event) and sends the files, never the text anew.
                raise exc.failure from exc
            except (DeliveryError, PermanentError) as exc:
                # The final text goes out as a new message instead (and so on a retry).
                await self._streams.remove(key)
                log.info("matrix_final_edit_failed", reason=str(exc) or type(exc).__name__)
                await send_reply(client, outbound, settings=self._settings, apply_trust=trust)
        else:
            await send_reply(client, outbound, settings=self._settings, apply_trust=trust)
        if key is not None and record is not None:
            await self._streams.remove(key)
        reply_to = outbound.in_reply_to
        if reply_to is not None and reply_to.channel == self._name:
            await self._marks.answered(RoomId(outbound.target), EventId(reply_to.source_id))
