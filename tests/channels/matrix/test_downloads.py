"""The download lanes without a homeserver: per-room order, other rooms not held back, the
bound on downloads at once, what a connection that ends mid-download forgets, and a store
failure ending the connection. The fetch is a gate the test opens; the real download is
covered on Synapse by test_media_lanes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

import anyio
import pytest

from squidd.channels.matrix.downloads import Lanes
from squidd.core.models import Inbound, SessionId
from squidd.errors import StorageError

pytestmark = pytest.mark.anyio


def message(event_id: str, room: str) -> Inbound:
    return Inbound(
        channel="matrix", source_id=event_id, session_id=SessionId(room), sender="@a:x", text=""
    )


class Fetches:
    """A fetch per file that waits until the test releases it; counts what runs at once."""

    def __init__(self) -> None:
        self.gates: dict[str, anyio.Event] = {}
        self.running = 0
        self.most = 0
        self.fail: set[str] = set()

    def gate(self, name: str) -> anyio.Event:
        return self.gates.setdefault(name, anyio.Event())

    async def __call__(self, inbound: Inbound, content: Mapping[str, Any]) -> Inbound:
        name = str(content["name"])
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.gate(name).wait()
            if name in self.fail:
                raise StorageError("disk full")
        finally:
            self.running -= 1
        return replace(inbound, text=f"[file: {name}]")


class Run:
    def __init__(self, limit: int = 3) -> None:
        self.handed: list[tuple[str, str]] = []
        self.forgotten: list[str] = []
        self.fetches = Fetches()
        self.ended = False
        self.lanes = Lanes(
            self._hand_on,
            self.fetches,
            forget=self.forgotten.append,
            on_failure=self._end,
            limit=limit,
        )

    async def _hand_on(self, room: str, inbound: Inbound) -> None:
        self.handed.append((room, inbound.text or inbound.source_id))

    def _end(self) -> None:
        self.ended = True


@pytest.fixture
async def run() -> AsyncIterator[Run]:
    async with anyio.create_task_group() as tg:
        state = Run()
        await tg.start(state.lanes.run)
        yield state
        tg.cancel_scope.cancel()


async def test_a_room_keeps_its_order_and_does_not_hold_back_another(run: Run) -> None:
    lanes = run.lanes
    lanes.push("!a", message("$a1", "!a"), {"name": "big.bin"})
    lanes.push("!a", message("$a2", "!a"), None)
    lanes.push("!b", message("$b1", "!b"), {"name": "small.png"})
    lanes.push("!b", message("$b2", "!b"), None)
    await anyio.wait_all_tasks_blocked()
    assert run.handed == [] and lanes.busy("!a") and lanes.busy("!b")
    run.fetches.gate("small.png").set()
    await anyio.wait_all_tasks_blocked()
    assert run.handed == [("!b", "[file: small.png]"), ("!b", "$b2")]
    assert not lanes.busy("!b") and lanes.busy("!a")
    run.fetches.gate("big.bin").set()
    await anyio.wait_all_tasks_blocked()
    assert run.handed[2:] == [("!a", "[file: big.bin]"), ("!a", "$a2")]
    assert not lanes.busy("!a")


async def test_at_most_limit_files_download_at_once() -> None:
    async with anyio.create_task_group() as tg:
        run = Run(limit=2)
        await tg.start(run.lanes.run)
        for room in ("!a", "!b", "!c", "!d"):
            run.lanes.push(room, message(f"${room}", room), {"name": room})
        await anyio.wait_all_tasks_blocked()
        assert run.fetches.running == 2
        for room in ("!a", "!b", "!c", "!d"):
            run.fetches.gate(room).set()
        await anyio.wait_all_tasks_blocked()
        assert len(run.handed) == 4 and run.fetches.most == 2
        tg.cancel_scope.cancel()


async def test_a_connection_ending_mid_download_forgets_what_was_not_handed_on() -> None:
    async with anyio.create_task_group() as tg:
        run = Run()
        await tg.start(run.lanes.run)
        run.lanes.push("!a", message("$file", "!a"), {"name": "big.bin"})
        run.lanes.push("!a", message("$text", "!a"), None)
        run.lanes.push("!b", message("$done", "!b"), {"name": "done.png"})
        run.fetches.gate("done.png").set()
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert run.handed == [("!b", "[file: done.png]")]
    assert sorted(run.forgotten) == ["$file", "$text"]
    assert not run.lanes.busy("!a")


async def test_a_store_failure_ends_the_connection(run: Run) -> None:
    run.fetches.fail.add("big.bin")
    run.lanes.push("!a", message("$file", "!a"), {"name": "big.bin"})
    run.fetches.gate("big.bin").set()
    await anyio.wait_all_tasks_blocked()
    assert run.ended and isinstance(run.lanes.failure, StorageError)
    assert run.handed == []
