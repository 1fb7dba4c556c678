"""The verification requests the bot answers: to-device and in a room, SAS only.

A request (`m.key.verification.request`) from an allowed user is answered with `ready`;
anyone else's with `cancel` (`m.user`). The person's client then sends `start`; the bot
accepts (`sas.SasExchange`), trades keys, and shows the emoji to whoever asks the running
daemon (`squidd matrix verify`, over the status socket: `listing`, `confirm`). Once the
operator confirms, the bot sends its MAC; when the person's MAC checks out it sends `done`,
marks the person's device verified and hands their master key, if the MAC covered it, to
`Identity.verified` (which signs it with the bot's user-signing key). A mismatch is a
`cancel` (`m.mismatched_sas`). A flow lives 10 minutes at most (the spec's timeout); the
flows in progress are kept on disk (`kept`): after a restart a `ready` one goes on, one
cut after its start is cancelled and the person told in her DM (`end_interrupted`).

In a room the flow's id is the request event's id and every later event refers to it
(`m.reference`); to-device it is the request's `transaction_id`.

Anyone can send these events, in any order and any shape, and matrix-nio never sees them
(`client.SquiddClient`). Which events are steps of which flow is `steps`'s; each step is
checked here before it is acted on: a step out of order
(a key before the start, a MAC before the keys, a second start or MAC, an `accept` to the
side that accepts) cancels its flow with `m.unexpected_message`; methods, hashes or MACs
we do not speak with `m.unknown_method`; a malformed step with `m.invalid_message`; a wrong
MAC with `m.key_mismatch`; a step of an unknown to-device flow from an allowed person with
`m.unknown_transaction`; a request from anyone else with `m.user`. Events from another
user than the flow's, steps of finished flows and unknown in-room flows are ignored. How
many flows are kept and how many unasked-for events are answered is bounded (`limits`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from squidd.channels.matrix.online import Identity, Link
from squidd.channels.matrix.verification.flow import (
    FINISHED,
    IDLE,
    LIFETIME_S,
    PREFIX,
    REQUEST,
    Flow,
    is_room_verification,
)
from squidd.channels.matrix.verification.kept import FILE_NAME, RESUMABLE, FlowFile
from squidd.channels.matrix.verification.limits import (
    MAX_KEPT_FLOWS,
    MAX_LIVE_FLOWS,
    MAX_LIVE_PER_USER,
    Answers,
)
from squidd.channels.matrix.verification.sas import SAS_V1, Party, SasError, SasExchange
from squidd.channels.matrix.verification.steps import (
    Step,
    from_another,
    room_step,
    to_device_steps,
)
from squidd.channels.matrix.verification.wire import Wire
from squidd.errors import SquiddError, StorageError

log = structlog.get_logger()
RESTARTED = "squidd restarted during the verification"
RESTARTED_NOTICE = (
    "Our verification was interrupted by a restart of squidd and has been cancelled. "
    "Please start it again."
)
__all__ = ["Flow", "Identity", "Verifications", "is_room_verification"]


class Verifications:
    """Every verification flow of the bot's device; one per channel. The connection of the
    moment (its client, policy and the bot's signing identity) is asked of `link`."""

    def __init__(
        self,
        link: Link,
        *,
        device_trust: str = "allowlisted",
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._link = link
        self._monotonic = monotonic
        self._wall = wall
        self._file: FlowFile | None = None
        self._flows: dict[str, Flow] = {}
        self._answers = Answers()
        self._wire = Wire(link, device_trust)

    # --- across a restart (kept) ------------------------------------------------------------

    async def restore(self, folder: Path) -> None:
        """Once per run, before the first sync: take up the flows a previous run left in
        `folder`. A `ready` one goes on; one cut after its start waits for `end_interrupted`."""
        if self._file is not None:
            return
        self._file = FlowFile(folder / FILE_NAME)
        now = self._monotonic()
        for record in await self._file.load():
            age = max(0.0, self._wall() - record.started_at)
            if age >= LIFETIME_S or record.id in self._flows:
                continue  # her client gave up on it long ago
            state = "ready" if record.state in RESUMABLE else "interrupted"
            flow = Flow(record.id, record.user_id, record.device_id, record.room_id, now - age)
            flow.state, flow.started_at = state, record.started_at
            self._flows[flow.id] = flow
            log.info("matrix_verification_restored", flow=flow.id, user=flow.user_id, state=state)
        await self._save()

    async def end_interrupted(self) -> None:
        """After the first sync: cancel each flow a restart cut, and say so in her DM."""
        for flow in [f for f in self._flows.values() if f.state == "interrupted"]:
            try:
                await self._cancel(flow, "m.user", RESTARTED + "; please start again")
                await self._wire.tell(flow, RESTARTED_NOTICE)
            except SquiddError as exc:
                log.warning("matrix_verification_step_failed", flow=flow.id, reason=str(exc))
        await self._save()

    async def _save(self) -> None:
        if self._file is None:
            return
        try:
            await self._file.save(f.kept() for f in self._flows.values() if f.state not in FINISHED)
        except StorageError as exc:
            log.warning("matrix_verification_not_kept", reason=str(exc))

    # --- input -----------------------------------------------------------------------------

    async def on_to_device(self, events: list[Any]) -> None:
        """The verification events of a sync's to-device list."""
        await self._guarded_expire()
        for step in to_device_steps(events):
            await self._guarded(step)

    async def take(self, room_id: str, event: Any) -> bool:
        """Handle a room event (nio's, decrypted) if it is a verification step; True if so."""
        source = getattr(event, "source", None)
        if not isinstance(source, Mapping) or not is_room_verification(source):
            return False
        await self.on_room_event(room_id, source)
        return True

    async def on_room_event(self, room_id: str, source: Mapping[str, Any]) -> None:
        """An in-room verification event (`is_room_verification(source)` said so)."""
        client = self._link.client
        if client is None or not from_another(source, client.user_id):
            return  # our own events come back in the timeline
        await self._guarded_expire()
        step = room_step(room_id, source, client.user_id, self._flows)
        if step is not None:
            await self._guarded(step)

    async def _guarded(self, step: Step) -> None:
        try:
            try:
                await self._handle(step.kind, step.sender, step.flow_id, step.content, step.room)
            except SasError as exc:
                flow = self._flows.get(step.flow_id)
                if flow is not None and flow.state not in FINISHED:
                    await self._cancel(flow, exc.code, exc.reason)
        except SquiddError as exc:  # the homeserver out of reach: the flow times out
            log.warning("matrix_verification_step_failed", flow=step.flow_id, reason=str(exc))
        except Exception:  # a defect of ours; one odd event must not stop the sync loop
            log.exception("matrix_verification_failed", flow=step.flow_id, sender=step.sender)
        await self._save()

    async def _guarded_expire(self) -> None:
        try:
            await self.expire()
        except SquiddError as exc:
            log.warning("matrix_verification_step_failed", reason=str(exc))
        except Exception:
            log.exception("matrix_verification_failed")
        await self._save()

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
        if flow is None or flow.user_id != sender or flow.state in IDLE:
            log.debug("matrix_verification_ignored", type=kind, flow=flow_id)
            return
        if step == "cancel":
            code = content.get("code")
            flow.state, flow.cancel_code = "cancelled", code if isinstance(code, str) else "?"
            log.info(
                "matrix_verification_cancelled", flow=flow.id, by=sender, code=flow.cancel_code
            )
        elif step == "start":
            await self._start(flow, content)
        elif step == "key":
            await self._key(flow, content)
        elif step == "mac":
            if flow.state not in ("keys", "confirmed") or flow.their_mac is not None:
                raise SasError("m.unexpected_message", "a MAC before the keys, or a second one")
            flow.their_mac = content
            await self._finish(flow)
        elif step == "done":
            log.debug("matrix_verification_their_done", flow=flow.id)
        elif step != "ready":  # `accept` too: the bot never starts, so it accepts nothing
            raise SasError("m.unexpected_message", f"unexpected {kind}")

    async def _unknown(self, sender: str, flow_id: str) -> None:
        """A to-device step of a flow we do not know (e.g. begun before a restart): tell an
        allowed person's devices, so their client stops waiting."""
        if not self._allowed(sender):
            return
        if not self._answers.unknown_flow(sender, self._monotonic()):
            log.debug("matrix_verification_ignored", flow=flow_id, reason="answered enough")
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
        now = self._monotonic()
        flow = Flow(flow_id, sender, device, room, now)
        # Refused flows are not kept: anyone can send requests to the bot's device.
        if not self._allowed(sender):
            if self._answers.stranger(sender, now):
                log.info("matrix_verification_refused", user=sender, reason="not an allowed user")
                await self._cancel(flow, "m.user", "squidd verifies only the people it serves")
            return None
        live = [f for f in self._flows.values() if f.state not in FINISHED]
        if len(live) >= MAX_LIVE_FLOWS or [f.user_id for f in live].count(sender) >= (
            MAX_LIVE_PER_USER
        ):
            log.warning("matrix_verification_refused", user=sender, reason="too many at once")
            if self._answers.unknown_flow(sender, now):
                await self._cancel(flow, "m.user", "too many verifications at once; try later")
            return None
        self._keep(flow)
        methods = content.get("methods", [SAS_V1])  # a bare start (legacy) names its method
        if content.get("method", SAS_V1) != SAS_V1 or not (
            isinstance(methods, list) and SAS_V1 in methods
        ):
            await self._cancel(flow, "m.unknown_method", "squidd verifies with emoji (SAS) only")
            return None
        log.info("matrix_verification_requested", flow=flow_id, user=sender, device=device)
        await self._wire.query_device(sender, device)
        flow.state = "ready"
        await self._save()  # kept before she sees `ready`: a run killed after it goes on
        if "methods" in content:  # a request gets `ready`; a bare start goes on at once
            await self._wire.send(
                flow, "ready", {"from_device": self._wire.own.device_id, "methods": [SAS_V1]}
            )
        return flow

    def _allowed(self, sender: str) -> bool:
        """The connection's policy lets `sender` in (no one while offline)."""
        policy = self._link.policy
        return policy is not None and policy.user_allowed(sender)

    def _keep(self, flow: Flow) -> None:
        """Keep `flow`, dropping the oldest finished flows beyond `MAX_KEPT_FLOWS`."""
        finished = [f for f in self._flows.values() if f.state in FINISHED]
        finished.sort(key=lambda f: f.created)
        while len(self._flows) >= MAX_KEPT_FLOWS and finished:
            del self._flows[finished.pop(0).id]
        self._flows[flow.id] = flow

    async def _start(self, flow: Flow, content: Mapping[str, Any]) -> None:
        if flow.state != "ready" or content.get("from_device") != flow.device_id:
            raise SasError("m.unexpected_message", "start out of order or from another device")
        start = dict(content)
        flow.exchange = SasExchange(
            self._wire.own, Party(flow.user_id, flow.device_id), flow.id, start
        )
        flow.state = "started"
        await self._wire.send(flow, "accept", flow.exchange.accept_content())

    async def _key(self, flow: Flow, content: Mapping[str, Any]) -> None:
        if flow.exchange is None or flow.state != "started":
            raise SasError("m.unexpected_message", "key before start")
        ours = flow.exchange.receive_key(content)
        await self._wire.send(flow, "key", ours)
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
        await self._guarded_expire()
        try:
            return await self._confirm(flow_id, match=match)
        finally:
            await self._save()

    async def _confirm(self, flow_id: str | None, *, match: bool) -> dict[str, Any]:
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
        keys = {f"ed25519:{self._wire.own.device_id}": self._wire.own_device_key()}
        identity = self._link.identity
        master = identity.own_master_key() if identity is not None else None
        if master:
            keys[f"ed25519:{master}"] = master
        await self._wire.send(flow, "mac", flow.exchange.mac_content(keys))
        flow.state = "confirmed"
        await self._finish(flow)

    async def _finish(self, flow: Flow) -> None:
        """Check their MAC once we have it and the operator confirmed; then `done`."""
        if not flow.confirmed or flow.their_mac is None or flow.exchange is None:
            return
        known = await self._their_keys(flow)
        flow.verified_keys = flow.exchange.check_mac(flow.their_mac, known)
        await self._wire.send(flow, "done", {})
        flow.state = "done"
        await self._trust(flow, known)

    async def _trust(self, flow: Flow, known: Mapping[str, str]) -> None:
        device = self._wire.device(flow.user_id, flow.device_id)
        if device is not None and f"ed25519:{flow.device_id}" in flow.verified_keys:
            self._wire.bound().verify_device(device)
        masters = [known[k] for k in flow.verified_keys if k != f"ed25519:{flow.device_id}"]
        identity = self._link.identity
        if masters and identity is not None:
            await identity.verified(flow.user_id, masters[0])
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
            if flow.state not in FINISHED:
                await self._cancel(flow, "m.timeout", "the verification took too long")

    async def _their_keys(self, flow: Flow) -> dict[str, str]:
        await self._wire.query_device(flow.user_id, flow.device_id)
        known: dict[str, str] = {}
        device = self._wire.device(flow.user_id, flow.device_id)
        if device is not None:
            known[f"ed25519:{flow.device_id}"] = device.ed25519
        identity = self._link.identity
        master = await identity.master_key_of(flow.user_id) if identity is not None else None
        if master:
            known[f"ed25519:{master}"] = master
        return known

    async def _cancel(self, flow: Flow, code: str, reason: str) -> None:
        flow.state, flow.cancel_code = "cancelled", code
        log.info("matrix_verification_cancel_sent", flow=flow.id, user=flow.user_id, code=code)
        await self._wire.send(flow, "cancel", {"code": code, "reason": reason})
