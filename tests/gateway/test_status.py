"""The status socket: owner-only, one answer per client, and a failing snapshot answered
with an error instead of taking the daemon down."""

from __future__ import annotations

import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from squidd.commands.status import fetch_status
from squidd.gateway.status import StatusServer, ask

pytestmark = pytest.mark.anyio


async def test_a_failing_snapshot_is_an_error_answer_not_a_crash() -> None:
    calls = 0

    async def snapshot() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise PermissionError("outbox dir unreadable")
        return {"version": "x", "pid": 1}

    # A short directory: unix socket paths are limited to about 100 bytes.
    with tempfile.TemporaryDirectory(prefix="sq-", dir="/tmp") as tmp:
        path = Path(tmp) / "s.sock"
        server = StatusServer(path, snapshot)
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            first = await anyio.to_thread.run_sync(fetch_status, path)
            second = await anyio.to_thread.run_sync(fetch_status, path)
            tg.cancel_scope.cancel()
    assert "could not gather its status" in first["error"]
    assert second == {"version": "x", "pid": 1}


async def test_requests_go_to_their_op_and_an_unknown_op_is_an_error() -> None:
    seen: list[dict[str, Any]] = []

    async def snapshot() -> dict[str, Any]:
        return {"pid": 1}

    async def verify(request: Mapping[str, Any]) -> dict[str, Any]:
        seen.append(dict(request))
        return {"verification": {"id": request["id"]}}

    with tempfile.TemporaryDirectory(prefix="sq-", dir="/tmp") as tmp:
        path = Path(tmp) / "s.sock"
        server = StatusServer(path, snapshot, {"matrix.verify": verify})
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            request = {"op": "matrix.verify", "id": "f1", "match": True}
            answer = await anyio.to_thread.run_sync(ask, path, request)
            unknown = await anyio.to_thread.run_sync(ask, path, {"op": "shutdown"})
            status = await anyio.to_thread.run_sync(fetch_status, path)
            tg.cancel_scope.cancel()
    assert answer == {"verification": {"id": "f1"}}
    assert seen == [request]
    assert "answers no request 'shutdown'" in unknown["error"]
    assert status == {"pid": 1}
