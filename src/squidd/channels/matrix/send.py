"""An `Outbound` sent as room events: rendered, split, related to the message it answers.

A reply is rendered from markdown to sanitised HTML and split into pieces that each fit one
event (split again when the HTML made a piece too big). The first piece replies to the
message and mentions its sender; inside a thread every piece stays in the thread, each one
replying to the piece before it. Transaction ids are stable for the same reply to the same
message, so a retried send is not doubled. The reply's files follow its text as media
events (`upload`), each with a transaction id of the same kind. Errors leave as squidd's
types: a refusal is classified by `client.send_refusal`; a device that appeared between the
trust pass and the send is marked and the send retried once. Each event spends a token of
the account's rate budget (`rate.py`): replies first, reactions after, edits only when
affordable at once.

In an encrypted room the room key is shared here, before nio's own `room_send` would: nio
counts a share as done even when its to-device requests failed (it gathers them and drops
the errors), so a reply sent through a homeserver outage went out under a key the person
never got. A share that missed a device is dropped, and the send is retried later with a
new key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from nio import AsyncClient, ErrorResponse, OlmUnverifiedDeviceError, RoomSendResponse
from nio.api import Api

from squidd.channels.matrix.client import send_refusal
from squidd.channels.matrix.errors import CAUGHT, NETWORK_ERRORS, describe, send_error
from squidd.channels.matrix.events import event_id_or_none
from squidd.channels.matrix.ids import EventId, RoomId
from squidd.channels.matrix.rate import Priority, budget_for
from squidd.channels.matrix.render import (
    MAX_CONTENT_BYTES,
    content_size,
    message_content,
    split_markdown,
)
from squidd.channels.matrix.stream import edit_content, stream_transaction_id
from squidd.channels.matrix.upload import file_content, upload_limit
from squidd.config.matrix import MatrixSettings
from squidd.core.models import Inbound, Outbound
from squidd.errors import DeliveryError, PermanentError

log = structlog.get_logger()


async def send_reply(
    client: AsyncClient,
    outbound: Outbound,
    *,
    settings: MatrixSettings,
    apply_trust: Callable[[], None] | None,
) -> None:
    """Send `outbound` to its room; `apply_trust` (None before the policy is built) marks
    the devices again before each event, as devices can appear at any time."""
    room_id = RoomId(outbound.target)  # a Matrix reply's target is its room
    if room_id not in client.rooms:
        raise PermanentError(f"the bot is not in the Matrix room {room_id}")
    reply_to = outbound.in_reply_to
    if reply_to is not None and reply_to.channel != outbound.channel:
        reply_to = None
    contents: list[dict[str, Any]] = []
    if outbound.text.strip() or not outbound.files:
        contents = pieces(outbound.text, settings.max_message_bytes, settings.msgtype)
    thread_root = event_id_or_none(reply_to.thread_root) if reply_to else None
    previous: str | None = reply_to.source_id if reply_to is not None else None

    async def send(index: int, piece: dict[str, Any], key: str) -> None:
        nonlocal previous
        content = relate(piece, index, reply_to, thread_root, previous)
        previous = await _room_send(
            client,
            room_id,
            content,
            transaction_id(reply_to, index, key),
            device_trust=settings.device_trust,
            apply_trust=apply_trust,
        )

    for index, piece in enumerate(contents):
        await send(index, piece, piece.get("body", ""))
    if contents and previous is not None:
        await _offer_reactions(client, room_id, outbound, previous, settings, apply_trust)
    if outbound.files:
        limit = await upload_limit(client)
        room = client.rooms[room_id]
        for number, ref in enumerate(outbound.files, start=len(contents)):
            # The key names the file, not its upload: a resend gets the same id.
            key = f"file\0{ref.sha256}\0{ref.name}"
            media, notice = await file_content(
                client, ref, encrypted=bool(room.encrypted), limit=limit
            )
            await send(number, media or message_content(notice, settings.msgtype), key)
    log.info(
        "matrix_reply_sent",
        room=room_id,
        events=len(contents) + len(outbound.files),
        files=len(outbound.files),
        chars=len(outbound.text),
        in_reply_to=reply_to.source_id if reply_to is not None else None,
    )


def pieces(text: str, max_message_bytes: int, msgtype: str) -> list[dict[str, Any]]:
    """Message contents for `text`, each small enough for one event."""
    if not text.strip():
        text = "(empty reply)"
    out: list[dict[str, Any]] = []
    todo = split_markdown(text, max_message_bytes)
    while todo:
        chunk = todo.pop(0)
        content = message_content(chunk, msgtype)
        size = len(chunk.encode("utf-8"))
        if content_size(content) > MAX_CONTENT_BYTES and size > 1_000:
            # HTML made it too big (e.g. a table of tiny cells): split this piece again.
            todo[:0] = split_markdown(chunk, max(1_000, size // 2))
            continue
        out.append(content)
    return out


def relate(
    piece: dict[str, Any],
    index: int,
    reply_to: Inbound | None,
    thread_root: str | None,
    previous: str | None,
) -> dict[str, Any]:
    """Piece `index` of a reply with its relation and mentions; `previous` is the event it
    follows (the message answered, for the first piece)."""
    content = dict(piece)
    if thread_root:
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": thread_root,
            "is_falling_back": index > 0,
            "m.in_reply_to": {"event_id": previous},
        }
    elif index == 0 and previous:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": previous}}
    if index == 0 and reply_to is not None:
        content["m.mentions"] = {"user_ids": [reply_to.sender]}
    else:
        content["m.mentions"] = {}
    return content


def transaction_id(reply_to: Inbound | None, index: int, body: str) -> str:
    """Stable for the same reply to the same message, so a retried send is not doubled."""
    if reply_to is None:
        return f"squidd-{uuid.uuid4().hex}"
    digest = hashlib.sha256(f"{reply_to.source_id}\0{index}\0{body}".encode()).hexdigest()
    return f"squidd-{digest[:32]}"


async def send_event(
    client: AsyncClient,
    room_id: RoomId,
    event_type: str,
    content: dict[str, Any],
    *,
    tx_id: str,
    device_trust: str,
    apply_trust: Callable[[], None] | None,
    priority: Priority = Priority.REPLY,
) -> str:
    """Send one room event of any type the way a reply's pieces go (trust pass, checked key
    share, one retry for a device that appeared, a token of the account's rate budget at
    `priority`: an edit raises `rate.Unaffordable` rather than wait); return its event id."""
    return await _room_send(
        client,
        room_id,
        content,
        tx_id,
        device_trust=device_trust,
        apply_trust=apply_trust,
        event_type=event_type,
        priority=priority,
    )


async def _offer_reactions(
    client: AsyncClient,
    room_id: RoomId,
    outbound: Outbound,
    event_id: str,
    settings: MatrixSettings,
    apply_trust: Callable[[], None] | None,
) -> None:
    """The outbound's `reactions` put on its (last) message, for the person to pick."""
    for key in outbound.reactions:
        relates = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
        await _room_send(
            client,
            room_id,
            {"m.relates_to": relates},
            transaction_id(outbound.in_reply_to, -1, f"reaction\0{event_id}\0{key}"),
            device_trust=settings.device_trust,
            apply_trust=apply_trust,
            event_type="m.reaction",
            priority=Priority.OFFER,
        )


async def _room_send(
    client: AsyncClient,
    room_id: RoomId,
    content: dict[str, Any],
    tx_id: str,
    *,
    device_trust: str,
    apply_trust: Callable[[], None] | None,
    event_type: str = "m.room.message",
    priority: Priority = Priority.REPLY,
) -> str:
    ignore_unverified = device_trust == "all"
    budget = budget_for(client)
    for attempt in (1, 2):
        if apply_trust is not None:
            apply_trust()
        try:
            await _share_room_key(client, room_id, ignore_unverified=ignore_unverified)
            async with budget.spend(priority):
                response = await _send_one(
                    client, room_id, event_type, content, tx_id, ignore_unverified=ignore_unverified
                )
        except OlmUnverifiedDeviceError as exc:
            # A device appeared between our trust pass and the send: mark it, retry.
            if attempt == 2:
                raise DeliveryError(f"cannot encrypt for {room_id}: {describe(exc)}") from exc
            continue
        except CAUGHT as exc:
            error = send_error(room_id, exc)
            if error is None:
                raise  # a defect: the router parks it after a few attempts, never loops
            raise error from exc
        if isinstance(response, RoomSendResponse):
            event_id: EventId = response.event_id
            return event_id
        if isinstance(response, ErrorResponse):
            raise send_refusal(room_id, response)
        answer = type(response).__name__
        raise DeliveryError(f"sending to {room_id}: unexpected answer {answer}")
    raise DeliveryError(f"cannot send to {room_id}")


async def _send_one(
    client: AsyncClient,
    room_id: RoomId,
    event_type: str,
    content: dict[str, Any],
    tx_id: str,
    *,
    ignore_unverified: bool,
) -> Any:
    """nio's `room_send`, except that in an encrypted room an edit's `m.relates_to` is also
    left in clear beside the ciphertext, as the spec asks (servers and clients aggregate
    edits by it; nio would hide it inside)."""
    room = client.rooms.get(room_id)
    relation = content.get("m.relates_to")
    is_edit = isinstance(relation, dict) and relation.get("rel_type") == "m.replace"
    if room is None or not room.encrypted or client.olm is None or not is_edit:
        return await client.room_send(
            room_id, event_type, content, tx_id=tx_id, ignore_unverified_devices=ignore_unverified
        )
    # The key was shared by `_share_room_key` just before; nio's encrypt uses that session.
    encrypted_type, encrypted = client.encrypt(room_id, event_type, content)
    encrypted["m.relates_to"] = relation
    method, path, data = Api.room_send(
        client.access_token, room_id, encrypted_type, encrypted, tx_id
    )
    return await client._send(RoomSendResponse, method, path, data, response_data=(room_id,))


async def send_final_edit(
    client: AsyncClient,
    outbound: Outbound,
    event_id: str,
    key: str,
    *,
    settings: MatrixSettings,
    apply_trust: Callable[[], None] | None,
) -> None:
    """Deliver `outbound` as the final edit of the streamed message `event_id` (the full
    formatted body, rendered as a normal reply); a reply too long for one event continues
    in new events, and its files follow."""
    room_id = RoomId(outbound.target)
    if room_id not in client.rooms:
        raise PermanentError(f"the bot is not in the Matrix room {room_id}")
    reply_to = outbound.in_reply_to
    if reply_to is not None and reply_to.channel != outbound.channel:
        reply_to = None
    contents = pieces(outbound.text, settings.max_message_bytes, settings.msgtype)
    thread_root = event_id_or_none(reply_to.thread_root) if reply_to else None
    previous = event_id
    for index, piece in enumerate(contents):
        content = relate(piece, index, reply_to, thread_root, previous)
        if index == 0:
            content = edit_content(content, event_id)
        tx_id = stream_transaction_id(key, f"final-{index}")
        sent = await _room_send(
            client,
            room_id,
            content,
            tx_id,
            device_trust=settings.device_trust,
            apply_trust=apply_trust,
        )
        previous = sent if index else event_id
    if outbound.reactions:
        await _offer_reactions(client, room_id, outbound, previous, settings, apply_trust)
    if outbound.files:
        files_only = dataclasses.replace(outbound, text="")
        try:
            await send_reply(client, files_only, settings=settings, apply_trust=apply_trust)
        except (DeliveryError, PermanentError) as exc:
            raise FilesAfterEditError(exc) from exc
    log.info("matrix_reply_sent", room=room_id, events=len(contents), edit=True)


class FilesAfterEditError(Exception):
    """The final edit went out, the reply's files did not: `failure` is why. Sent again,
    the edit's transaction ids make the homeserver return the same events (nothing shown
    twice), so the reply is retried (or parked) as it is, never sent as new text."""

    def __init__(self, failure: DeliveryError | PermanentError) -> None:
        super().__init__(str(failure))
        self.failure = failure


async def _share_room_key(client: AsyncClient, room_id: RoomId, *, ignore_unverified: bool) -> None:
    """Share the room's Megolm key if it needs sharing, and check it reached every device
    nio meant it for; if not, drop the session and fail the send (a `DeliveryError`)."""
    olm = client.olm
    room = client.rooms.get(room_id)
    if olm is None or room is None or not room.encrypted:
        return
    if not room.members_synced:
        # What nio's `room_send` would do first; done here so its share never runs unchecked.
        members = await client.joined_members(room_id)
        if isinstance(members, ErrorResponse):
            raise send_refusal(room_id, members)
        if client.should_query_keys:
            _ = await client.keys_query()
    while olm.should_share_group_session(room_id):
        running = client.sharing_session.get(room_id)
        if running is not None:
            await running.wait()  # another reply to this room is sharing: see how it went
            continue
        await _share_checked(client, room_id, ignore_unverified=ignore_unverified)
        return


async def _share_checked(client: AsyncClient, room_id: RoomId, *, ignore_unverified: bool) -> None:
    olm = client.olm
    try:
        response = await client.share_group_session(
            room_id, ignore_unverified_devices=ignore_unverified
        )
    except NETWORK_ERRORS:
        # Raised before nio's own clean-up (claiming keys): leave no share marked running.
        running = client.sharing_session.pop(room_id, None)
        if running is not None:
            running.set()
        olm.outbound_group_sessions.pop(room_id, None)
        raise
    missed = _unreached(client, room_id, getattr(response, "users_shared_with", set()))
    if missed:
        olm.outbound_group_sessions.pop(room_id, None)
        log.info("matrix_room_key_share_incomplete", room=room_id, devices=len(missed))
        raise DeliveryError(f"the room key for {room_id} did not reach {len(missed)} device(s)")


def _unreached(client: AsyncClient, room_id: RoomId, reached: set[Any]) -> set[tuple[str, str]]:
    """The (user, device) pairs nio's share was for (the way nio picks them: not our own
    device, not blacklisted, with an Olm session) that it did not reach."""
    olm = client.olm
    session = olm.outbound_group_sessions.get(room_id)
    if session is None:
        return set()
    done: set[tuple[str, str]] = set(reached) | session.users_shared_with | session.users_ignored
    wanted: set[tuple[str, str]] = {
        (str(user_id), str(device.id))
        for user_id in client.rooms[room_id].users
        for device in client.device_store.active_user_devices(user_id)
        if device.id != client.device_id
        and not olm.is_device_blacklisted(device)
        and olm.session_store.get(device.curve25519)
    }
    return wanted - done
