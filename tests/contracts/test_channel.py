"""The `Channel` contract (tests/contracts/channel_contract.py) over the test double, Matrix
(real Synapse) and email (real Dovecot + Postfix); and a planted channel that acknowledges
a message before it sent the reply, which the contract must catch."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
import pytest
from anyio.abc import TaskStatus
from nio import AsyncClient, AsyncClientConfig

from squidd.channels.api import ApiChannel
from squidd.channels.api.keys import ApiKeys
from squidd.channels.email import EmailChannel
from squidd.channels.matrix import MatrixChannel
from squidd.config.api import ApiSettings
from squidd.core.models import Inbound, Outbound, SessionId
from squidd.core.ports import Channel, ChannelState, Inbox
from squidd.store.idempotency import IdempotencyDir
from tests.channels.email.mailbox import DOMAIN, MailServer, find, inject, make_mail, wait_for
from tests.channels.email.mailbox import bot_settings as email_settings
from tests.contracts.channel_contract import (
    CHECKS,
    Harness,
    check_inbound_ack_and_send,
    check_stop_within_grace,
)
from tests.servers.synapse.server import SynapseServer
from tests.support.matrix import Human, wait_until
from tests.support.matrix import bot_settings as matrix_settings
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio

ALICE_MAIL = f"alice@{DOMAIN}"


class DoubleHarness:
    """The test double: its far side is the double's own lists."""

    def __init__(self) -> None:
        self.double = MemoryChannel("double", refused={"nobody"})

    def make(self) -> Channel:
        self.double = MemoryChannel("double", refused={"nobody"})
        return self.double

    async def deliver(self, text: str) -> None:
        self.double.inject(text, sender="alice")

    async def acknowledged(self, inbound: Inbound) -> bool:
        return inbound.source_id in self.double.acked

    async def wait_reply(self, inbound: Inbound, text: str) -> None:
        assert any(
            s.in_reply_to == inbound.source_id and text in s.text for s in self.double.sent
        ), self.double.sent

    async def refused(self, channel: Channel) -> Outbound:
        return Outbound("double", "nobody", "hello?", SessionId("s1"))


class _AckOnReceipt:
    """An inbox wrapper: acknowledges each message as soon as it was handed on."""

    def __init__(self, inbox: Inbox) -> None:
        self._inbox = inbox
        self.poison = inbox.poison

    async def put(self, message: Inbound) -> None:
        await self._inbox.put(message)
        await message.ack()

    def report(self, state: ChannelState, detail: str = "") -> None:
        self._inbox.report(state, detail)


class AcksBeforeSending:
    """A planted faulty channel: the double, but it acknowledges what it receives at once,
    before any reply was sent (as a mail channel that marks `\\Seen` on fetch would)."""

    def __init__(self, inner: MemoryChannel) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        return self._inner.name

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        await self._inner.run(_AckOnReceipt(inbox), task_status=task_status)

    async def send(self, outbound: Outbound) -> None:
        await self._inner.send(outbound)


class PlantedHarness(DoubleHarness):
    def make(self) -> Channel:
        super().make()
        return AcksBeforeSending(self.double)


class ApiHarness:
    """A client of the API channel (a thread with a streaming request per message): the
    reply is held once its content chunk arrived, acknowledged once `[DONE]` did."""

    KEY = "sqd-contract-key-0123456789"

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.channel: ApiChannel | None = None
        self.streams: dict[str, list[str]] = {}

    def make(self) -> Channel:
        settings = ApiSettings(enabled=True, listen="127.0.0.1:0")
        self.channel = ApiChannel(settings, ApiKeys([self.KEY]), IdempotencyDir(self.tmp))
        return self.channel

    def _request(self, port: int, text: str, lines: list[str]) -> None:
        body = {"model": "squidd", "stream": True, "messages": [{"role": "user", "content": text}]}
        headers = {"Authorization": f"Bearer {self.KEY}"}
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        try:
            with (
                httpx2.Client(timeout=120) as http,
                http.stream("POST", url, json=body, headers=headers) as response,
            ):
                for line in response.iter_lines():
                    lines.append(line)
        except httpx2.HTTPError:
            lines.append("(cut)")

    async def deliver(self, text: str) -> None:
        assert self.channel is not None
        lines: list[str] = []
        self.streams[text] = lines
        args = (self.channel.port, text, lines)
        threading.Thread(target=self._request, args=args, daemon=True).start()

    def _lines(self, inbound: Inbound) -> list[str]:
        return next(lines for text, lines in self.streams.items() if text in inbound.text)

    async def acknowledged(self, inbound: Inbound) -> bool:
        return "data: [DONE]" in self._lines(inbound)

    async def wait_reply(self, inbound: Inbound, text: str) -> None:
        with anyio.fail_after(60):
            while not any(text in line for line in self._lines(inbound)):  # noqa: ASYNC110
                await anyio.sleep(0.02)

    async def refused(self, channel: Channel) -> Outbound:
        return Outbound("api", "someone", "hello?", SessionId("api:someone"))


class MatrixHarness:
    """A person (a nio client) in a direct chat with the bot on the real Synapse."""

    def __init__(self, server: SynapseServer, tmp: Path) -> None:
        self.server = server
        suffix = uuid.uuid4().hex[:8]
        self.bot = server.register(f"bot-{suffix}", password=f"pw-bot-{suffix}")
        self.alice_user = server.register(f"alice-{suffix}", password=f"pw-alice-{suffix}")
        self.data_dir = tmp / "data"
        self.data_dir.mkdir()
        self.tmp = tmp
        self.channel: MatrixChannel | None = None
        self.alice: Human | None = None
        self.room = ""

    def make(self) -> Channel:
        settings = matrix_settings(self.server, self.bot, allowed_users=[self.alice_user.user_id])
        self.channel = MatrixChannel(settings, self.data_dir)
        return self.channel

    async def _person(self) -> Human:
        if self.alice is None:
            user = self.alice_user
            store = self.tmp / "alice"
            store.mkdir()
            client = AsyncClient(
                self.server.url,
                user.user_id,
                device_id=user.device_id,
                store_path=str(store),
                config=AsyncClientConfig(store_sync_tokens=False, store_name="alice.db"),
            )
            client.restore_login(user.user_id, user.device_id, user.access_token)
            self.alice = Human(client=client, user=user)
            await self.alice.sync()
        return self.alice

    async def aclose(self) -> None:
        if self.alice is not None:
            await self.alice.client.close()

    async def deliver(self, text: str) -> None:
        alice = await self._person()
        if not self.room:
            self.room = await alice.room_with(self.bot.user_id)
        await alice.send(self.room, text)

    def _call(self, path: str) -> dict[str, Any]:
        return self.server.call("GET", path, token=self.bot.access_token)

    async def acknowledged(self, inbound: Inbound) -> bool:
        """Whether a sync from the bot's saved position would no longer bring it."""
        saved = self.data_dir / "matrix" / "sync.json"
        if not saved.exists():
            return False
        token = json.loads(saved.read_text())["next_batch"]
        timeline = quote(json.dumps({"room": {"timeline": {"limit": 100}}}))
        path = f"/_matrix/client/v3/sync?timeout=0&since={quote(token)}&filter={timeline}"
        answer = await anyio.to_thread.run_sync(self._call, path)
        joined = answer.get("rooms", {}).get("join", {})
        events = joined.get(self.room, {}).get("timeline", {}).get("events", [])
        return inbound.source_id not in {event.get("event_id") for event in events}

    async def wait_reply(self, inbound: Inbound, text: str) -> None:
        alice = await self._person()
        await alice.wait_for(
            lambda: any(
                text in str(seen.content.get("body", ""))
                for seen in alice.replies_to(self.bot.user_id, inbound.source_id)
            ),
            "the reply",
        )

    async def refused(self, channel: Channel) -> Outbound:
        """A room the bot was kicked from: Synapse answers M_FORBIDDEN."""
        alice = await self._person()
        room = await alice.room_with(self.bot.user_id, direct=False)
        known = self.channel
        await wait_until(
            lambda: known is not None and known.client is not None and room in known.client.rooms,
            "the channel knows the room",
        )
        kick = {"user_id": self.bot.user_id, "reason": "contract"}
        path = f"/_matrix/client/v3/rooms/{room}/kick"
        await anyio.to_thread.run_sync(
            lambda: self.server.call("POST", path, kick, token=self.alice_user.access_token)
        )
        return Outbound("matrix", room, "anyone there?", SessionId(room))


class EmailHarness:
    """Alice's mail through Postfix into the bot's Dovecot INBOX, and her own INBOX."""

    def __init__(self, server: MailServer, tmp: Path) -> None:
        self.server = server
        self.bot = server.take_bot()
        self.data_dir = tmp / "data"
        self.data_dir.mkdir()

    def make(self) -> Channel:
        return EmailChannel(email_settings(self.server, self.bot), self.data_dir)

    async def deliver(self, text: str) -> None:
        mail = make_mail(to=self.bot, sender=ALICE_MAIL, subject="contract", body=text)
        await inject(self.server, mail, to=self.bot, sender=ALICE_MAIL)

    async def acknowledged(self, inbound: Inbound) -> bool:
        return "\\Seen" in (await find(self.server, self.bot, inbound.source_id)).flags

    async def wait_reply(self, inbound: Inbound, text: str) -> None:
        def answers(mail: EmailMessage) -> bool:
            body = mail.get_body(preferencelist=("plain",))
            found = body is not None and text in str(body.get_content())
            return mail["In-Reply-To"] == inbound.source_id and found

        await wait_for(self.server, ALICE_MAIL, answers)

    async def refused(self, channel: Channel) -> Outbound:
        """No such mailbox in Postfix's own domain: 550."""
        ghost = f"ghost@{DOMAIN}"
        return Outbound("email", ghost, "hello ghost", SessionId(ghost))


@pytest.fixture(
    params=[
        "double",
        "api",
        pytest.param("matrix", marks=pytest.mark.matrix),
        pytest.param("email", marks=pytest.mark.mail),
    ]
)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    if request.param == "matrix":
        matrix = MatrixHarness(request.getfixturevalue("synapse"), tmp_path)
        try:
            yield matrix
        finally:
            await matrix.aclose()
    elif request.param == "email":
        yield EmailHarness(request.getfixturevalue("mail_server"), tmp_path)
    elif request.param == "api":
        yield ApiHarness(tmp_path)
    else:
        yield DoubleHarness()


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__.removeprefix("check_"))
async def test_the_channel_keeps_the_contract(
    harness: Harness, check: Callable[[Harness], Awaitable[None]]
) -> None:
    await check(harness)


async def test_a_channel_that_acks_before_it_sends_fails_the_contract() -> None:
    with pytest.raises(AssertionError, match="acknowledged before the reply was sent"):
        await check_inbound_ack_and_send(PlantedHarness())
    with pytest.raises(AssertionError, match="an unanswered message was acknowledged"):
        await check_stop_within_grace(PlantedHarness())


async def test_the_honest_double_passes_where_the_planted_one_fails() -> None:
    # The same checks, the same double, without the early ack: the failure above is the
    # planted fault's, not the harness's.
    await check_inbound_ack_and_send(DoubleHarness())
    await check_stop_within_grace(DoubleHarness())
