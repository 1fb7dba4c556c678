"""The email channel's send under the router's poison parking: a failure the SMTP table
maps (the server not reachable: `DeliveryError`) is retried past the attempt limit and never
parked, while an exception the table does not map (a defect in or under the library) leaves
`send` unchanged and is parked after `max_attempts` tries, never retried forever.

The channel is the real one (compose, the SMTP sender, the table); SMTP is a loopback port
with nothing listening, and for the defect `aiosmtplib.send` itself raises."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiosmtplib
import anyio
import anyio.lowlevel
import pytest

from squidd.channels.email.channel import EmailChannel
from squidd.config.email import EmailSettings
from squidd.core.models import ChannelName, Destination, Inbound, SessionId, SourceId
from squidd.core.poison import PoisonGuard
from squidd.core.router import Router
from tests.support.doubles import MemoryAttempts, MemoryDeadLetters
from tests.support.router import build_router

pytestmark = pytest.mark.anyio

MAX_ATTEMPTS = 3


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def _channel(tmp_path: Path, port: int) -> EmailChannel:
    settings = EmailSettings(
        enabled=True,
        address="bot@example.org",
        username="bot@example.org",
        password="not-used-here",
        imap_host="127.0.0.1",
        imap_security="none",
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_security="none",
        allowed_senders=["alice@example.org"],
        trusted_authserv_id="mx.example.org",
        timeout_s=5,
    )
    return EmailChannel(settings, tmp_path / "data")


def _router(channel: EmailChannel, dead: MemoryDeadLetters, tries: list[float]) -> Router:
    async def turn(message: Inbound) -> str:
        return "the answer"

    async def no_sleep(delay: float) -> None:
        tries.append(delay)
        await anyio.lowlevel.checkpoint()

    return build_router(
        turn,
        {"email": channel},
        poison=PoisonGuard(MemoryAttempts(), dead, max_attempts=MAX_ATTEMPTS),
        max_concurrent_turns=1,
        sleep=no_sleep,
    )


def _mail(told: list[str]) -> Inbound:
    async def undeliverable(reason: str) -> None:
        told.append(reason)

    return Inbound(
        ChannelName("email"),
        SourceId("<m1@example.org>"),
        SessionId("alice@example.org"),
        "alice@example.org",
        "hello",
        reply_to=Destination(ChannelName("email"), "alice@example.org"),
        on_undeliverable=undeliverable,
    )


async def _until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(20):
        while not check():  # noqa: ASYNC110 - polls state that has no event
            await anyio.sleep(0.005)


async def test_an_unmapped_exception_from_send_is_parked_not_retried_forever(
    tmp_path: Path, refusing_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    async def broken_library(*args: Any, **kwargs: Any) -> None:
        calls.append("send")
        raise AttributeError("'NoneType' object has no attribute 'write'")

    monkeypatch.setattr(aiosmtplib, "send", broken_library)
    dead, told, waits = MemoryDeadLetters(), [], []
    router = _router(_channel(tmp_path, refusing_port), dead, waits)
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(_mail(told))
        await _until(lambda: bool(dead.items))
        await router.wait_idle()
        tg.cancel_scope.cancel()
    assert len(calls) == MAX_ATTEMPTS
    (item,) = dead.items.values()
    assert item.error == "AttributeError" and item.attempts == MAX_ATTEMPTS
    assert len(told) == 1 and "parked" in told[0]


async def test_a_mapped_passing_failure_from_send_is_retried_past_the_limit(
    tmp_path: Path, refusing_port: int
) -> None:
    dead, told, waits = MemoryDeadLetters(), [], []
    router = _router(_channel(tmp_path, refusing_port), dead, waits)
    async with anyio.create_task_group() as tg:
        await tg.start(router.run)
        await router.submit(_mail(told))
        await _until(lambda: len(waits) > 2 * MAX_ATTEMPTS)  # real refused connections
        tg.cancel_scope.cancel()
    assert dead.items == {} and told == []
