"""`squidd status` shows the sub-agents running, per parent session, and their caps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from squidd.commands.status import format_status
from squidd.core.models import SessionId
from squidd.core.runs import PendingRun
from squidd.gateway.runtime import build_runtime
from squidd.gateway.turn_tools import TurnTools
from tests.gateway.test_spawn import PARENT, settings_for
from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio


async def test_status_counts_running_sub_agents_per_parent_and_shows_the_caps(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async def fire(run: PendingRun) -> None:
        return None

    settings = settings_for(tmp_path, fake_llm, max_per_session=2, max_running=5, timeout_s=90)
    runtime = build_runtime(settings)
    try:
        agents = TurnTools(runtime, fire=fire).subagents
        await agents.start_background(PARENT, "matrix", "one", "matrix:!room:x")
        await agents.start_background(PARENT, "matrix", "two", "matrix:!room:x")
        await agents.start_background(SessionId("alice@example.org"), "email", "three", "")
        snapshot = agents.snapshot()
        assert snapshot["running"] == 3
        assert snapshot["per_session"] == {PARENT: 2, "alice@example.org": 1}
        text = format_status(
            {"uptime_s": 1, "subagents": snapshot}, now=datetime(2026, 1, 1, tzinfo=UTC)
        )
        assert (
            "sub-agents: 3 running (caps: 2 per session, 5 in the daemon, depth 1, 90 s, "
            "10 tool rounds each)"
        ) in text
        assert f"  {PARENT}: 2 running" in text
        assert "  alice@example.org: 1 running" in text
    finally:
        await runtime.aclose()


def test_status_says_when_sub_agents_are_off() -> None:
    text = format_status({"uptime_s": 1, "subagents": {"enabled": False}})
    assert "sub-agents: off" in text
