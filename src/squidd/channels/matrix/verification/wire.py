"""The verification flows' side of the logged-in client: the bot's own device and key, the
devices it knows of a person, and sending a step (to-device, or into the flow's room
through `send.send_event`, encrypted like any reply). A homeserver out of reach is a
`SquiddError` (the caller logs it and the flow times out); a refusal is logged here.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import structlog
from nio import AsyncClient, ToDeviceError, ToDeviceMessage

from squidd.channels.matrix.client import call
from squidd.channels.matrix.ids import RoomId
from squidd.channels.matrix.online import Link
from squidd.channels.matrix.send import send_event
from squidd.channels.matrix.verification.flow import PREFIX, Flow
from squidd.channels.matrix.verification.sas import Party, SasError
from squidd.errors import SquiddError

log = structlog.get_logger()


class Wire:
    """The client the flows talk through: the `link`'s, none while the channel is offline.
    The link's trust pass is re-applied before an in-room event is encrypted."""

    def __init__(self, link: Link, device_trust: str) -> None:
        self._link = link
        self._device_trust = device_trust

    @property
    def client(self) -> AsyncClient | None:
        return self._link.client

    def bound(self) -> AsyncClient:
        if self.client is None:
            raise SasError("m.unexpected_message", "the bot is not connected")
        return self.client

    @property
    def own(self) -> Party:
        client = self.bound()
        return Party(client.user_id, client.device_id)

    def own_device_key(self) -> str:
        olm = self.bound().olm
        if olm is None:
            raise SasError("m.unknown_method", "encryption is off: no device key to verify")
        return str(olm.account.identity_keys["ed25519"])

    def device(self, user_id: str, device_id: str) -> Any | None:
        client = self.client
        if client is None or client.olm is None:
            return None
        devices = client.device_store.active_user_devices(user_id)
        return next((d for d in devices if d.id == device_id), None)

    async def query_device(self, user_id: str, device_id: str) -> None:
        client = self.client
        if client is None or client.olm is None or self.device(user_id, device_id) is not None:
            return
        client.olm.users_for_key_query.add(user_id)
        await call("querying a device's keys", client.keys_query())

    def direct_room(self, user_id: str) -> str | None:
        """A room of only the bot and `user_id` (their DM), if the client knows one."""
        client = self.client
        rooms = getattr(client, "rooms", None) or {}
        if client is None:
            return None
        pair = {client.user_id, user_id}
        return next((rid for rid, room in rooms.items() if set(room.users) == pair), None)

    async def tell(self, flow: Flow, text: str) -> None:
        """A notice to the person of `flow`: in its room, else in her DM with the bot."""
        client = self.client
        room = flow.room_id or self.direct_room(flow.user_id)
        if client is None or room is None:
            log.info("matrix_verification_not_told", user=flow.user_id, reason="no direct chat")
            return
        # One transaction id per flow: told twice (a crash in between), it shows once.
        digest = hashlib.sha256(f"{flow.id}\0{flow.user_id}".encode()).hexdigest()[:32]
        await send_event(
            client,
            RoomId(room),
            "m.room.message",
            {"msgtype": "m.notice", "body": text},
            tx_id=f"squidd-verify-told-{digest}",
            device_trust=self._device_trust,
            apply_trust=self._link.apply_trust,
        )

    async def send(self, flow: Flow, step: str, content: dict[str, Any]) -> None:
        client = self.client
        if client is None:
            return
        kind = PREFIX + step
        if flow.room_id is None:
            body = {**content, "transaction_id": flow.id}
            message = ToDeviceMessage(kind, flow.user_id, flow.device_id, body)
            response = await call(
                "sending a verification step", client.to_device(message, tx_id=uuid.uuid4().hex)
            )
            if isinstance(response, ToDeviceError):
                log.warning("matrix_verification_send_failed", step=step, reason=response.message)
            return
        body = {**content, "m.relates_to": {"rel_type": "m.reference", "event_id": flow.id}}
        try:
            await send_event(
                client,
                RoomId(flow.room_id),
                kind,
                body,
                tx_id=f"squidd-verify-{uuid.uuid4().hex}",
                device_trust=self._device_trust,
                apply_trust=self._link.apply_trust,
            )
        except SquiddError as exc:
            log.warning("matrix_verification_send_failed", step=step, reason=str(exc))
