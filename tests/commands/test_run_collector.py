"""`squidd run` and the garbage collector: start-up runs with it paused (the CLI pauses it,
tests/test_cli.py); the daemon turns it back on once READY=1 is sent, with what start-up
left frozen out of later collections (docs/performance.md)."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import anyio
import pytest

from squidd.commands import run

pytestmark = pytest.mark.anyio


async def test_the_daemon_resumes_the_collector_once_ready() -> None:
    frozen_before = gc.get_freeze_count()
    gc.disable()
    try:
        daemon = SimpleNamespace(ready=anyio.Event())
        async with anyio.create_task_group() as tg:
            tg.start_soon(run._resume_collection_when_ready, daemon)
            await anyio.wait_all_tasks_blocked()
            assert not gc.isenabled()  # not before READY=1
            daemon.ready.set()
        assert gc.isenabled()
        assert gc.get_freeze_count() > frozen_before
    finally:
        gc.unfreeze()
        gc.enable()


async def test_a_start_that_never_gets_ready_resumes_the_collector_after_its_bound() -> None:
    gc.disable()
    try:
        daemon = SimpleNamespace(ready=anyio.Event())  # never set: a start that hangs
        await run._resume_collection_when_ready(daemon, longest_pause_s=0)
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()
