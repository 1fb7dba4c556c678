"""Fixtures of the dashboard tests (their helpers are in tests/support/dashboard.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.channels.api.support import ApiDaemon
from tests.support.dashboard import shell_api_daemon
from tests.support.fake_llm import FakeLLM


@pytest.fixture
async def api(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[ApiDaemon]:
    """A started daemon with the dashboard (see `shell_api_daemon`), closed after the test."""
    daemon = shell_api_daemon(tmp_path, fake_llm.base_url)
    try:
        await daemon.start()
        yield daemon
    finally:
        daemon.close()
