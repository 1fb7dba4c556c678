"""Helpers for the daemon's tests: settings pointing at the scripted LLM, a daemon running
in this process with in-memory channels, and a way to wait for what it delivers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from squidd.config import Settings
from squidd.core.ports import Channel
from squidd.gateway.build import build_daemon
from squidd.gateway.channels import fixed_channels
from squidd.gateway.daemon import Daemon
from tests.support.clock import FakeClock
from tests.support.config import config_sections


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Tests that call `squidd.cli.main` configure logging onto pytest's capture streams,
    which are closed after the test; put the defaults back so later tests do not log there."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers


def make_settings(data: Path, llm_url: str, **sections: dict[str, Any]) -> Settings:
    gateway = {
        "restart_initial_delay_s": 0.01,
        "restart_max_delay_s": 0.05,
        "delivery_retry_initial_s": 0.01,
        "delivery_retry_max_s": 0.05,
        "shutdown_grace_s": 5,
        **sections.pop("gateway", {}),
    }
    return Settings(
        **config_sections(
            llm_url,
            data,
            api_key="sk-test-gateway-key-0001",
            gateway=gateway,
            cron={"poll_s": 0.05, **sections.pop("cron", {})},
            **sections,
        )
    )


@asynccontextmanager
async def running_daemon(
    settings: Settings, channels: Sequence[Channel], *, clock: FakeClock | None = None
) -> AsyncIterator[Daemon]:
    daemon = build_daemon(
        settings, channels=fixed_channels(*channels), clock=clock, handle_signals=False
    )
    runtime = daemon.runtime
    result: list[int] = []
    try:
        async with anyio.create_task_group() as tg:

            async def serve() -> None:
                result.append(await daemon.serve())

            tg.start_soon(serve)
            with anyio.fail_after(10):
                await daemon.ready.wait()
            yield daemon
            daemon.request_stop()
    finally:
        await runtime.aclose()
    assert result == [0]


async def eventually(check: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Poll `check` until it holds (a bound, not a speed assertion)."""
    with anyio.fail_after(timeout):
        while not check():  # noqa: ASYNC110 - polls state that has no event
            await anyio.sleep(0.01)
