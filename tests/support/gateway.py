"""A daemon in this process for the gateway's tests: settings pointing at the scripted LLM
with short delays, the daemon run with in-memory channels, and a poll for what it
delivers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from squidd.config import Settings
from squidd.core.ports import Channel
from squidd.gateway.build import build_daemon
from squidd.gateway.channels import fixed_channels
from squidd.gateway.daemon import Daemon
from tests.support.clock import FakeClock
from tests.support.config import config_sections

# The command the approval tests ask for: each run appends a line to `ran.txt`.
RAN_COMMAND = "echo ran >> ran.txt"


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


def shell_approval_settings(
    tmp_path: Path, llm_url: str, *, approvers: list[str], timeout_s: float
) -> tuple[Settings, Path]:
    """The shell on, no command denied outright, every call asked of `approvers`; with the
    file (`ran.txt` in the workspace) that `RAN_COMMAND` appends to."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = make_settings(
        tmp_path / "data",
        llm_url,
        agents={"workspace": str(workspace)},
        tools={
            "shell": {"enabled": True},
            "policy": {"default_deny": []},
            "approval": {"approvers": approvers, "timeout_s": timeout_s},
        },
    )
    return settings, workspace / "ran.txt"


def question_id(text: str, command: str | None = None) -> str:
    """The id in an approval prompt for a shell command (that command, when given)."""
    found = re.search(r"Approval needed \(([0-9a-f]{8})\): Run shell: (.*)\?\n", text)
    assert found is not None, text
    if command is not None:
        assert found.group(2) == command
    return found.group(1)


def runs(marker: Path) -> int:
    """How many times `RAN_COMMAND` ran: the lines in `marker` (`ran.txt`)."""
    return len(marker.read_text().splitlines()) if marker.exists() else 0
