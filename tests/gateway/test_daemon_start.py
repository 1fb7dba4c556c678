"""The daemon starts its channels side by side: one slow connection (a Matrix login and
first sync) does not wait for another (an IMAP login), and READY waits for all of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskStatus

from squidd.core.ports import Inbox
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import make_settings, running_daemon
from tests.support.memory_channel import MemoryChannel

pytestmark = pytest.mark.anyio


@dataclass
class _WaitsForOther(MemoryChannel):
    """Reports started only once `other` began connecting: started one after the other,
    the daemon would never get past this channel (and `running_daemon` would give up)."""

    other: anyio.Event = field(default_factory=anyio.Event)

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        await self.other.wait()
        await super().run(inbox, task_status=task_status)


@dataclass
class _Connecting(MemoryChannel):
    connecting: anyio.Event = field(default_factory=anyio.Event)

    async def run(self, inbox: Inbox, *, task_status: TaskStatus[None]) -> None:
        self.connecting.set()
        await super().run(inbox, task_status=task_status)


async def test_channels_connect_side_by_side_before_ready(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    second = _Connecting("second")
    first = _WaitsForOther("first", other=second.connecting)
    settings = make_settings(tmp_path / "data", fake_llm.base_url)
    async with running_daemon(settings, [first, second]) as daemon:
        assert daemon.ready.is_set()
        assert daemon.supervisor.children["first"].state == "connected"
        first.inject("hello first", session="a")
        second.inject("hello second", session="b")
        await first.wait_for(1)
        await second.wait_for(1)
    assert [s.text for s in first.sent] == ["echo: hello first"]
    assert [s.text for s in second.sent] == ["echo: hello second"]
