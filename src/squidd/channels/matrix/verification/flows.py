"""The verification requests the bot answers: to-device and in a room, SAS only.

A request (`m.key.verification.request`) from an allowed user is answered with `ready`;
anyone else's with `cancel` (`m.user`). The person's client then sends `start`; the bot
accepts (`sas.SasExchange`), trades keys, and shows the emoji to whoever asks the running
daemon (`squidd matrix verify`, over the status socket: `listing`, `confirm`). Once the
operator confirms, the bot sends its MAC; when the person's MAC checks out it sends `done`,
marks the person's device verified and hands their master key, if the MAC covered it, to
`Identity.verified` (which signs it with the bot's user-signing key). A mismatch is a
`cancel` (`m.mismatched_sas`). A flow lives 10 minutes at most (the spec's timeout).

In a room the flow's id is the request event's id and every later event refers to it
(`m.reference`); to-device it is the request's `transaction_id`. Events of unknown flows,
of other devices or out of order are ignored or cancel the flow, never crash the loop.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from nio import AsyncClient, ToDeviceError, ToDeviceMessage

from squidd.channels.matrix.ids import RoomId
from squidd.channels.matrix.policy import Policy
from squidd.channels.matrix.send import send_event
from squidd.channels.matrix.verification.sas import SAS_V1, Party, SasError, SasExchange
from squidd.errors import SquiddError

log = structlog.get_logger()

PREFIX = "m.key.verification."
REQUEST = PREFIX + "request"
LIFETIME_S = 600.0  # the spec: a request older than 10 minutes is void
MAX_LIVE_FLOWS = 16
FUTURE_SLACK_MS = 5 * 60 * 1000


class Identity(Protocol):
    """The bot's cross-signing identity, as far as verification needs it."""

    def own_master_key(self) -> str | None: ...

    async def master_key_of(self, user_id: str) -> str | None: ...

    async def verified(self, user_id: str, master_key: str) -> None: ...


@dataclass(slots=True)
class Flow:
    id: str
    user_id: str
    device_id: str
    room_id: str | None
    created: float
    state: str = "requested"  # ready, started, keys, confirmed, done, cancelled
    exchange: SasExchange | None = None
    their_mac: Mapping[str, Any] | None = None
    confirmed: bool = False
    verified_keys: list[str] = field(default_factory=list)
    cancel_code: str = ""

    def view(self, now: float) -> dict[str, Any]:
        shown = self.exchange is not None and self.exchange.keys_exchanged
        return {
            "id": self.id,
            "user_id": self.user_id,
            "device_id": self.device_id,
            "room_id": self.room_id,
            "state": self.state,
            "emoji": self.exchange.emoji() if shown and self.exchange else None,
            "decimals": list(self.exchange.decimals()) if shown and self.exchange else None,
            "age_s": round(now - self.created, 1),
            "cancel_code": self.cancel_code or None,
        }


class Verifications:
    """Every verification flow of the bot's device; one per channel, bound to each client."""

    def __init__(
        self,
        *,
        device_trust: str = "allowlisted",
        identity: Identity | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._device_trust = device_trust
        self._identity = identity
        self._monotonic = monotonic
        self._flows: dict[str, Flow] = {}
        self._client: AsyncClient | None = None
        self._policy: Policy | None = None
        # The connection's trust pass, re-applied before an in-room event is encrypted.
        self.apply_trust: Callable[[], None] | None = None

    def attach(self, client: AsyncClient, policy: Policy, identity: Identity | None) -> None:
        """The connection's client, policy and (once known) identity from now on."""
        self._client, self._policy = client, policy
        if identity is not None:
            self._identity = identity

    # --- input -----------------------------------------------------------------------------

    async def on_to_device(self, events: list[Any]) -> None:
        """The verification events of a sync's to-device list."""
        await self.expire()
        for event in events:
            source = getattr(event, "source", None)
            if not isinstance(source, Mapping) or not str(source.get("type", "")).startswith(
                PREFIX
            ):
                continue
            content = source.get("content")
            if not isinstance(content, Mapping):
                continue
            flow_id = content.get("transaction_id")
            if not isinstance(flow_id, str) or not flow_id:
                continue
            kind = str(source["type"])
            if kind == REQUEST and _stale(content.get("timestamp")):
                log.info("matrix_verification_ignored", type=kind, reason="stale request")
                continue
            await self._guarded(kind, str(source.get("sender", "")), flow_id, content, None)
        self._prune_nio_queue()

    async def take(self, room_id: str, event: Any) -> bool:
        """Handle a room event (nio's, decrypted) if it is a verification step; True if so."""
        source = getattr(event, "source", None)
        if not isinstance(source, Mapping) or not is_room_verification(source):
            return False
        await self.on_room_event(room_id, source)
        return True

    async def on_room_event(self, room_id: str, source: Mapping[str, Any]) -> None:
        """An in-room verification event (`is_room_verification(source)` said so)."""
        content = source.get("content")
        if not isinstance(content, Mapping):
            return
        sender = str(source.get("sender", ""))
        if self._client is None or sender == self._client.user_id:
            return  # our own events come back in the timeline
        if content.get("msgtype") == REQUEST:
            if content.get("to") != self._client.user_id or _stale(source.get("origin_server_ts")):
                return
            await self._guarded(REQUEST, sender, str(source.get("event_id", "")), content, room_id)
            return
        relates = content.get("m.relates_to")
        flow_id = relates.get("event_id") if isinstance(relates, Mapping) else None
        if isinstance(flow_id, str) and flow_id in self._flows:
            await self._guarded(str(source.get("type")), sender, flow_id, content, room_id)

    async def _guarded(
        self, kind: str, sender: str, flow_id: str, content: Mapping[str, Any], room: str | None
    ) -> None:
        try:
            await self._handle(kind, sender, flow_id, content, room)
        except SasError as exc:
            flow = self._flows.get(flow_id)
            if flow is not None:
                await self._cancel(flow, exc.code, exc.reason)
        except Exception:  # one odd event must not stop the sync loop
            log.exception("matrix_verification_failed", flow=flow_id, sender=sender)

    async def _handle(
        self, kind: str, sender: str, flow_id: str, content: Mapping[str, Any], room: str | None
    ) -> None:
        if kind == REQUEST or (kind == PREFIX + "start" and flow_id not in self._flows):
            flow = await self._request(sender, flow_id, content, room)
            if flow is None or kind == REQUEST:
                return
        flow = self._flows.get(flow_id)
        step = kind.removeprefix(PREFIX)
        if flow is None and room is None and step not in ("cancel", "done"):
            await self._unknown(sender, flow_id)
            return
        if flow is None or flow.user_id != sender or flow.state in ("done", "cancelled"):
            log.debug("matrix_verification_ignored", type=kind, flow=flow_id)
            return
        if step == "cancel":
            flow.state, flow.cancel_code = "cancelled", str(content.get("code", ""))
            log.info(
                "matrix_verification_cancelled", flow=flow.id, by=sender, code=flow.cancel_code
            )
        elif step == "start":
            await self._start(flow, content)
        elif step == "key":
            await self._key(flow, content)
        elif step == "mac":
            flow.their_mac = content
            await self._finish(flow)
        elif step == "done":
            log.debug("matrix_verification_their_done", flow=flow.id)
        elif step not in ("ready", "accept"):
            raise SasError("m.unexpected_message", f"unexpected {kind}")

    async def _unknown(self, sender: str, flow_id: str) -> None:
        """A to-device step of a flow we do not know (e.g. begun before a restart): tell an
        allowed person's devices, so their client stops waiting."""
        if self._policy is None or not self._policy.user_allowed(sender):
            return
        log.info("matrix_verification_unknown", flow=flow_id, user=sender)
        flow = Flow(flow_id, sender, "*", None, self._monotonic())
        await self._cancel(flow, "m.unknown_transaction", "squidd knows no such verification")

    async def _request(
        self, sender: str, flow_id: str, content: Mapping[str, Any], room: str | None
    ) -> Flow | None:
        device = content.get("from_device")
        if not isinstance(device, str) or not device or flow_id in self._flows:
            return None
        flow = Flow(flow_id, sender, device, room, self._monotonic())
        # Refused flows are not kept: anyone can send requests to the bot's device.
        if self._policy is None or not self._policy.user_allowed(sender):
            log.info("matrix_verification_refused", user=sender, reason="not an allowed user")
            await self._cancel(flow, "m.user", "squidd verifies only the people it serves")
            return None
        live = [f for f in self._flows.values() if f.state not in ("done", "cancelled")]
        if len(live) >= MAX_LIVE_FLOWS:
            log.warning("matrix_verification_refused", user=sender, reason="too many at once")
            await self._cancel(flow, "m.user", "too many verifications at once; try later")
            return None
        self._flows[flow_id] = flow
        methods = content.get("methods", [SAS_V1])  # a bare start (legacy) names its method
        if content.get("method", SAS_V1) != SAS_V1 or SAS_V1 not in (methods or []):
            await self._cancel(flow, "m.unknown_method", "squidd verifies with emoji (SAS) only")
            return None
        log.info("matrix_verification_requested", flow=flow_id, user=sender, device=device)
        await self._query_device(sender, device)
        if "methods" in content:  # a request gets `ready`; a bare start goes on at once
            await self._send(
                flow, "ready", {"from_device": self._own.device_id, "methods": [SAS_V1]}
            )
        flow.state = "ready"
        return flow

    async def _start(self, flow: Flow, content: Mapping[str, Any]) -> None:
        if flow.state != "ready" or content.get("from_device") != flow.device_id:
            raise SasError("m.unexpected_message", "start out of order or from another device")
        start = dict(content)
        flow.exchange = SasExchange(self._own, Party(flow.user_id, flow.device_id), flow.id, start)
        flow.state = "started"
        await self._send(flow, "accept", flow.exchange.accept_content())

    async def _key(self, flow: Flow, content: Mapping[str, Any]) -> None:
        if flow.exchange is None or flow.state != "started":
            raise SasError("m.unexpected_message", "key before start")
        ours = flow.exchange.receive_key(content)
        await self._send(flow, "key", ours)
        flow.state = "keys"
        log.info(
            "matrix_verification_waiting",
            flow=flow.id,
            user=flow.user_id,
            hint="compare the emoji with `squidd matrix verify`",
        )

    # --- the operator ----------------------------------------------------------------------

    def listing(self) -> list[dict[str, Any]]:
        now = self._monotonic()
        return [flow.view(now) for flow in self._flows.values()]

    async def confirm(self, flow_id: str | None, *, match: bool) -> dict[str, Any]:
        """The operator compared the emoji: `match` sends our MAC, else cancels."""
        await self.expire()
        waiting = [f for f in self._flows.values() if f.state == "keys" and not f.confirmed]
        if flow_id:
            waiting = [f for f in waiting if f.id == flow_id or f.user_id == flow_id]
        if len(waiting) != 1:
            what = "no" if not waiting else "more than one"
            of = f" of {flow_id}" if flow_id else ""
            return {"error": f"{what} verification waits for a confirmation{of}"}
        flow = waiting[0]
        if not match:
            await self._cancel(flow, "m.mismatched_sas", "the operator says the emoji differ")
            return {"verification": flow.view(self._monotonic())}
        try:
            await self._confirmed(flow)
        except SasError as exc:
            await self._cancel(flow, exc.code, exc.reason)
        return {"verification": flow.view(self._monotonic())}

    async def _confirmed(self, flow: Flow) -> None:
        if flow.exchange is None:
            raise SasError("m.unexpected_message", "no exchange to confirm")
        flow.confirmed = True
        keys = {f"ed25519:{self._own.device_id}": self._own_device_key()}
        master = self._identity.own_master_key() if self._identity else None
        if master:
            keys[f"ed25519:{master}"] = master
        await self._send(flow, "mac", flow.exchange.mac_content(keys))
        flow.state = "confirmed"
        await self._finish(flow)

    async def _finish(self, flow: Flow) -> None:
        """Check their MAC once we have it and the operator confirmed; then `done`."""
        if not flow.confirmed or flow.their_mac is None or flow.exchange is None:
            return
        known = await self._their_keys(flow)
        flow.verified_keys = flow.exchange.check_mac(flow.their_mac, known)
        await self._send(flow, "done", {})
        flow.state = "done"
        await self._trust(flow, known)

    async def _trust(self, flow: Flow, known: Mapping[str, str]) -> None:
        device = self._device(flow.user_id, flow.device_id)
        if device is not None and f"ed25519:{flow.device_id}" in flow.verified_keys:
            self._bound().verify_device(device)
        masters = [known[k] for k in flow.verified_keys if k != f"ed25519:{flow.device_id}"]
        if masters and self._identity is not None:
            await self._identity.verified(flow.user_id, masters[0])
        log.info(
            "matrix_verification_done",
            flow=flow.id,
            user=flow.user_id,
            device=flow.device_id,
            identity_verified=bool(masters),
        )

    async def expire(self) -> None:
        now = self._monotonic()
        for flow in list(self._flows.values()):
            if now - flow.created < LIFETIME_S:
                continue
            del self._flows[flow.id]
            if flow.state not in ("done", "cancelled"):
                await self._cancel(flow, "m.timeout", "the verification took too long")

    # --- keys and sending ------------------------------------------------------------------

    def _bound(self) -> AsyncClient:
        if self._client is None:
            raise SasError("m.unexpected_message", "the bot is not connected")
        return self._client

    @property
    def _own(self) -> Party:
        client = self._bound()
        return Party(client.user_id, client.device_id)

    def _own_device_key(self) -> str:
        olm = self._bound().olm
        if olm is None:
            raise SasError("m.unknown_method", "encryption is off: no device key to verify")
        return str(olm.account.identity_keys["ed25519"])

    def _device(self, user_id: str, device_id: str) -> Any | None:
        client = self._client
        if client is None or client.olm is None:
            return None
        devices = client.device_store.active_user_devices(user_id)
        return next((d for d in devices if d.id == device_id), None)

    async def _query_device(self, user_id: str, device_id: str) -> None:
        client = self._client
        if client is None or client.olm is None or self._device(user_id, device_id) is not None:
            return
        client.olm.users_for_key_query.add(user_id)
        await client.keys_query()

    async def _their_keys(self, flow: Flow) -> dict[str, str]:
        await self._query_device(flow.user_id, flow.device_id)
        known: dict[str, str] = {}
        device = self._device(flow.user_id, flow.device_id)
        if device is not None:
            known[f"ed25519:{flow.device_id}"] = device.ed25519
        master = await self._identity.master_key_of(flow.user_id) if self._identity else None
        if master:
            known[f"ed25519:{master}"] = master
        return known

    async def _cancel(self, flow: Flow, code: str, reason: str) -> None:
        flow.state, flow.cancel_code = "cancelled", code
        log.info("matrix_verification_cancel_sent", flow=flow.id, user=flow.user_id, code=code)
        await self._send(flow, "cancel", {"code": code, "reason": reason})

    async def _send(self, flow: Flow, step: str, content: dict[str, Any]) -> None:
        client = self._client
        if client is None:
            return
        kind = PREFIX + step
        if flow.room_id is None:
            body = {**content, "transaction_id": flow.id}
            message = ToDeviceMessage(kind, flow.user_id, flow.device_id, body)
            response = await client.to_device(message, tx_id=uuid.uuid4().hex)
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
                apply_trust=self.apply_trust,
            )
        except SquiddError as exc:
            log.warning("matrix_verification_send_failed", step=step, reason=str(exc))

    def _prune_nio_queue(self) -> None:
        """matrix-nio queues its own answers to verification events (never sent by us)."""
        olm = self._client.olm if self._client else None
        if olm is not None:
            olm.outgoing_to_device_messages[:] = [
                m for m in olm.outgoing_to_device_messages if not m.type.startswith(PREFIX)
            ]


def is_room_verification(source: Mapping[str, Any]) -> bool:
    """A room event that belongs to a verification: the request message or a later step."""
    kind = str(source.get("type", ""))
    if kind.startswith(PREFIX):
        return True
    content = source.get("content")
    return (
        kind == "m.room.message"
        and isinstance(content, Mapping)
        and (content.get("msgtype") == REQUEST)
    )


def _stale(sent: Any) -> bool:
    """A request sent (ms since the epoch) more than 10 minutes ago or 5 in the future."""
    if not isinstance(sent, int):
        return True
    now_ms = int(time.time() * 1000)
    return now_ms - sent > LIFETIME_S * 1000 or sent - now_ms > FUTURE_SLACK_MS
