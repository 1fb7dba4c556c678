"""Fixtures of the Matrix tests: one real Synapse per session, people and a bot on it (the
shared ones live in tests/support/matrix.py and are imported here).

* `synapse` (package): the homeserver from tests/servers/synapse, stopped by PID at the end.
  How long the Matrix part took (install and start included) is printed in the summary.
* `bot` / `alice` / ... : fresh accounts per test (unique localparts), so tests share the
  server without seeing each other's rooms.
* `Human`: a matrix-nio client (with encryption) that plays the person at the keyboard.
* `run_channel`: runs a `MatrixChannel` in a task group with a small inbox that answers
  through `channel.send` and then acks, the way the gateway's router does.
* `squidds`: the `squidd run` children a test started, killed at its end if still running.
* `make_element`: a person on a current Element (matrix-js-sdk with its Rust crypto, sharing
  room keys only with cross-signed devices), one Node process per client, stopped by PID.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from squidd.channels.matrix import MatrixChannel
from squidd.config.matrix import MatrixSettings
from squidd.core.models import Inbound, Outbound
from squidd.core.ports import ChannelState, MediaSink
from squidd.gateway.pipeline import Pipeline
from tests.support.doubles import memory_poison
from tests.support.matrix import (
    ELAPSED,
    Human,
    Seen,
    bot,
    bot_settings,
    cross_sign,
    make_element,
    make_human,
    make_user,
    squidds,
    start_squidd,
    synapse,
    uid,
    wait_until,
)

# Re-exported: the fixtures for pytest, the helpers for the tests that import them from here.
__all__ = [
    "Human",
    "Seen",
    "bot",
    "bot_settings",
    "cross_sign",
    "make_element",
    "make_human",
    "make_user",
    "squidds",
    "start_squidd",
    "synapse",
    "uid",
    "wait_until",
]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    elapsed = config.stash.get(ELAPSED, None)
    if elapsed is not None:
        terminalreporter.write_line(
            f"matrix: the Synapse-backed part took {elapsed:.1f}s "
            "(homeserver install/start, tests, stop)"
        )


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


# --- running the channel ------------------------------------------------------------------


Responder = Callable[[Inbound], str]


def echo(message: Inbound) -> str:
    return f"echo: {message.text}"


class AnsweringInbox:
    """Answers every inbound through `channel.send`, then acks it (the router's contract)."""

    def __init__(self, channel: MatrixChannel, tg: TaskGroup, responder: Responder) -> None:
        self.channel = channel
        self.responder = responder
        self.received: list[Inbound] = []
        self.states: list[tuple[ChannelState, str]] = []
        self.answered: list[str] = []
        self.acked: list[str] = []
        self.gate: anyio.Event | None = None
        self._tg = tg
        self.poison = memory_poison()

    async def put(self, message: Inbound) -> None:
        self.received.append(message)
        self._tg.start_soon(self._answer, message)

    def report(self, state: ChannelState, detail: str = "") -> None:
        self.states.append((state, detail))

    async def _answer(self, message: Inbound) -> None:
        if self.gate is not None:
            await self.gate.wait()
        await self.channel.send(
            Outbound(
                channel="matrix",
                target=message.reply_to.target if message.reply_to else message.sender,
                text=self.responder(message),
                session_id=message.session_id,
                in_reply_to=message,
            )
        )
        self.answered.append(message.source_id)
        await message.ack()
        self.acked.append(message.source_id)

    async def all_acked(self) -> None:
        """Wait until every message received so far was answered and acked."""
        await wait_until(lambda: len(self.acked) >= len(self.received), "all acked")

    def texts(self) -> list[str]:
        return [m.text for m in self.received]


@asynccontextmanager
async def run_channel(
    settings: MatrixSettings,
    data_dir: Path,
    responder: Responder = echo,
    *,
    media: MediaSink | None = None,
    max_download_bytes: int = 8 * 1024 * 1024,
) -> AsyncIterator[tuple[MatrixChannel, AnsweringInbox]]:
    channel = MatrixChannel(settings, data_dir, media=media, max_download_bytes=max_download_bytes)
    async with anyio.create_task_group() as tg:
        inbox = AnsweringInbox(channel, tg, responder)
        # The channel's own stages (a thread's root) before the inbox, as in the daemon.
        pipeline = Pipeline(channel.stages(), inbox)
        await tg.start(pipeline.run)
        with anyio.fail_after(60):
            await tg.start(channel.run, pipeline)
        try:
            yield channel, inbox
        finally:
            tg.cancel_scope.cancel()
