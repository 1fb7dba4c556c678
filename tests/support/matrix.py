"""The Matrix world the end-to-end tests share: one real Synapse, people and a bot on it.

* the homeserver itself is the session's `synapse` (tests/support/servers.py).
* `bot` / `make_user`: fresh accounts per test (unique localparts), so tests share the
  server without seeing each other's rooms.
* `Human` / `make_human`: a matrix-nio client (with encryption) that plays the person at the
  keyboard; `make_element`: a person on a current Element (matrix-js-sdk with its Rust
  crypto), one Node process per client, stopped by PID.
* `squidds` / `start_squidd`: the `squidd run` children a test started, killed at its end if
  still running.

A conftest makes these fixtures available by importing them (`from tests.support.matrix
import bot as bot`).
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from nio import (
    AsyncClient,
    AsyncClientConfig,
    EnableEncryptionBuilder,
    MegolmEvent,
    RoomCreateResponse,
    RoomSendResponse,
    SyncResponse,
)
from nio.events import TypingNoticeEvent

from squidd.channels.matrix.identity.account import OwnIdentity
from squidd.channels.matrix.identity.api import MatrixApi
from squidd.channels.matrix.identity.local import IdentityFiles
from squidd.config.matrix import MatrixSettings
from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import SynapseServer, User
from tests.support.daemon import DaemonProcess


@pytest.fixture
async def squidds() -> AsyncIterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for daemon in started:
        if daemon.proc.poll() is None:
            await daemon.stop(signal.SIGKILL)


async def start_squidd(squidds: list[DaemonProcess], config: Path, log: Path) -> DaemonProcess:
    """A `squidd run` child, stopped at the test's end by `squidds`, once Matrix is connected."""
    daemon = DaemonProcess(config, log)
    squidds.append(daemon)
    await daemon.wait_event("matrix_connected")
    return daemon


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def make_user(synapse: SynapseServer, uid: str) -> Callable[[str], User]:
    def make(name: str) -> User:
        return synapse.register(f"{name}-{uid}", password=f"pw-{name}-{uid}")

    return make


@pytest.fixture
def bot(make_user: Callable[[str], User]) -> User:
    return make_user("squidd")


def bot_settings(synapse: SynapseServer, bot: User, **overrides: Any) -> MatrixSettings:
    values: dict[str, Any] = {
        "enabled": True,
        "homeserver": synapse.url,
        "user_id": bot.user_id,
        "password": bot.password,
        "reconnect_initial_delay_s": 0.2,
        "reconnect_max_delay_s": 1.0,
        "sync_timeout_s": 5.0,
        **synapse.bot_rate,
    }
    values.update(overrides)
    return MatrixSettings(**values)


# --- the person at the keyboard -----------------------------------------------------------


@dataclass
class Seen:
    room_id: str
    event: Any

    @property
    def content(self) -> dict[str, Any]:
        content: dict[str, Any] = self.event.source.get("content", {})
        return content


@dataclass
class Human:
    """A nio client with encryption that syncs on demand and keeps what it saw."""

    client: AsyncClient
    user: User
    events: list[Seen] = field(default_factory=list)
    typing: dict[str, list[set[str]]] = field(default_factory=dict)
    to_device: list[Any] = field(default_factory=list)
    next_batch: str | None = None

    @property
    def user_id(self) -> str:
        return self.user.user_id

    async def sync(self, timeout_ms: int = 0) -> None:
        response = await self.client.sync(
            timeout=timeout_ms,
            since=self.next_batch,
            sync_filter={"room": {"timeline": {"limit": 100}}},
        )
        assert isinstance(response, SyncResponse), response
        self.next_batch = response.next_batch
        self.to_device.extend(response.to_device_events)
        if self.client.should_upload_keys:
            await self.client.keys_upload()
        if self.client.should_query_keys:
            await self.client.keys_query()
        if self.client.should_claim_keys:
            await self.client.keys_claim(self.client.get_users_for_key_claiming())
        for room_id, info in response.rooms.join.items():
            for event in info.timeline.events:
                self.events.append(Seen(room_id, event))
            for ephemeral in info.ephemeral:
                if isinstance(ephemeral, TypingNoticeEvent):
                    self.typing.setdefault(room_id, []).append(set(ephemeral.users))
        # Room keys may arrive after the event: retry what is still encrypted.
        for seen in self.events:
            if isinstance(seen.event, MegolmEvent):
                seen.event.room_id = seen.room_id
                try:
                    seen.event = self.client.decrypt_event(seen.event)
                except Exception:  # noqa: BLE001, S112 - the key has not arrived yet
                    continue

    async def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
        try:
            with anyio.fail_after(timeout):
                while not predicate():
                    await self.sync(timeout_ms=1000)
        except TimeoutError:
            raise AssertionError(f"{self.user_id} did not see: {what}") from None

    def from_sender(self, sender: str, room_id: str | None = None) -> list[Seen]:
        return [
            s
            for s in self.events
            if getattr(s.event, "sender", None) == sender
            and (room_id is None or s.room_id == room_id)
            and s.event.source.get("type") in ("m.room.message", "m.room.encrypted")
            and not isinstance(s.event, MegolmEvent)
        ]

    def replies_to(self, sender: str, event_id: str) -> list[Seen]:
        return [
            s
            for s in self.from_sender(sender)
            if (s.content.get("m.relates_to") or {}).get("m.in_reply_to", {}).get("event_id")
            == event_id
        ]

    async def send(self, room_id: str, body: str, **extra: Any) -> str:
        content = {"msgtype": "m.text", "body": body, **extra}
        return await self.send_event(room_id, "m.room.message", content)

    async def send_event(self, room_id: str, event_type: str, content: dict[str, Any]) -> str:
        response = await self.client.room_send(
            room_id, event_type, content, ignore_unverified_devices=True
        )
        assert isinstance(response, RoomSendResponse), response
        event_id: str = response.event_id
        return event_id

    async def create_room(
        self, invite: list[str], *, encrypted: bool = False, direct: bool = False, name: str = ""
    ) -> str:
        initial_state = [EnableEncryptionBuilder().as_dict()] if encrypted else []
        response = await self.client.room_create(
            name=name or None, invite=invite, is_direct=direct, initial_state=initial_state
        )
        assert isinstance(response, RoomCreateResponse), response
        room_id: str = response.room_id
        await self.sync()
        return room_id

    async def room_with(self, user_id: str, *, encrypted: bool = False, direct: bool = True) -> str:
        """A new room with `user_id` invited and joined, this client synced (so it knows the
        member's device keys in an encrypted room)."""
        room = await self.create_room([user_id], encrypted=encrypted, direct=direct)
        await self.wait_for(lambda: self.membership(room, user_id) == "join", "member joins")
        await self.sync()
        return room

    async def join(self, room_id: str) -> None:
        response = await self.client.join(room_id)
        assert not hasattr(response, "status_code"), response
        await self.sync()

    def membership(self, room_id: str, user_id: str) -> str | None:
        room = self.client.rooms.get(room_id)
        if room is None:
            return None
        if user_id in room.users:
            return "invite" if room.users[user_id].invited else "join"
        return "leave"


@pytest.fixture
async def make_human(
    synapse: SynapseServer, make_user: Callable[[str], User], tmp_path: Path
) -> AsyncIterator[Callable[[str], Any]]:
    humans: list[Human] = []

    async def make(name: str, user: User | None = None, *, cross_signed: bool = True) -> Human:
        """A person; `cross_signed` (as current clients are) gives their account an identity
        that signs this device, which the bot's default `device_trust` asks for."""
        user = user or make_user(name)
        store = tmp_path / f"human-{name}"
        store.mkdir()
        client = AsyncClient(
            synapse.url,
            user.user_id,
            device_id=user.device_id,
            store_path=str(store),
            # nio would name the store after the user id, which may contain "/".
            config=AsyncClientConfig(
                encryption_enabled=True, store_sync_tokens=False, store_name=f"{name}.db"
            ),
        )
        client.restore_login(user.user_id, user.device_id, user.access_token)
        human = Human(client=client, user=user)
        humans.append(human)
        await human.sync()
        if cross_signed:
            await cross_sign(synapse, user, store)
        return human

    yield make
    for human in humans:
        await human.client.close()


@pytest.fixture
async def make_element(
    synapse: SynapseServer, make_user: Callable[[str], User], tmp_path: Path
) -> AsyncIterator[Callable[..., Any]]:
    """`await make_element("alice")`: logged in, synced and cross-signed (unless
    `cross_signed=False`) on a new device; its driver's log is `element-NAME.log`."""
    clients: list[ElementClient] = []

    async def make(name: str, user: User | None = None, *, cross_signed: bool = True) -> Any:
        user = user or make_user(name)
        client = ElementClient(tmp_path / f"element-{name}.log")
        clients.append(client)
        await client.start()
        await client.login(synapse.url, user.user_id, user.password)
        if cross_signed:
            await client.bootstrap_cross_signing()
        return client

    yield make
    for client in clients:
        await client.stop()


async def cross_sign(synapse: SynapseServer, user: User, folder: Path) -> OwnIdentity:
    """Give `user` a cross-signing identity that signs their device (as a current client
    does at sign-up), with squidd's own identity code; returns it (keys in `folder`)."""
    async with MatrixApi(synapse.url, user.user_id, user.access_token) as api:
        own = OwnIdentity(
            api, IdentityFiles(folder), device_id=user.device_id, password=user.password
        )
        await own.create(keep_recovery_key=False)
        assert await own.sign_device(), f"{user.user_id}'s device could not be cross-signed"
    return own


async def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll state that another task owns until it holds (a bound, not a speed assertion)."""
    try:
        with anyio.fail_after(timeout):
            while not predicate():  # noqa: ASYNC110 - no event to wait on for foreign state
                await anyio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for: {what}") from None
