"""The dashboard in a real browser: headless Chromium from Debian's packages (installed by
tests/servers/chromium/prepare), driven over the DevTools protocol. Without a key it sees
only the login form; it logs in with a key, sees the channels, pauses and removes a cron
job and approves a pending shell call, which then runs once. Each page is read once it has
loaded (the harness waits for the browser's navigation events, never for a time).
Screenshots of each step are saved under test-artifacts/dashboard/."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from squidd.store.cron_jobs import JobsFile
from tests.channels.api.support import ApiDaemon
from tests.faults.harness import wait_until
from tests.servers.chromium.browser import Browser, chromium
from tests.support.daemon import REPO
from tests.support.dashboard import add_job, shell_api_daemon
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_channel import write_atomic

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(chromium() is None, reason="chromium is not installed (not root?)"),
]
ARTIFACTS = REPO / "test-artifacts" / "dashboard"


@pytest.fixture
async def api(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[ApiDaemon]:
    daemon = shell_api_daemon(tmp_path, fake_llm.base_url)
    add_job(tmp_path / "data", "water-plants", "remind me", every="12h")
    try:
        await daemon.start()
        yield daemon
    finally:
        daemon.close()


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    driven = Browser(tmp_path / "chromium-profile")
    try:
        await driven.start()
        yield driven
    finally:
        await driven.close()


async def test_log_in_see_channels_remove_a_job_and_approve_a_shell_call(
    api: ApiDaemon, browser: Browser, fake_llm: FakeLLM
) -> None:
    text = await browser.goto(f"{api.url}/")
    assert "API key" in text and "Channels" not in text
    await browser.screenshot(ARTIFACTS / "1-login.png")

    text = await browser.navigating(
        f"document.querySelector('input[name=key]').value = {api.key!r};"
        "document.querySelector('form').submit()"
    )
    assert "api\tconnected" in text and "spool\tconnected" in text, text
    assert "water-plants" in text
    await browser.screenshot(ARTIFACTS / "2-overview.png")

    text = await browser.navigating(_click('form[action="/cron/water-plants/pause"] button'))
    assert "Resume" in text and "paused" in text, text
    [paused] = JobsFile(api.tmp / "data").load_sync()
    assert paused.paused
    await browser.screenshot(ARTIFACTS / "2b-paused.png")
    text = await browser.navigating(_click('form[action="/cron/water-plants/remove"] button'))
    assert "water-plants" not in text, text
    assert JobsFile(api.tmp / "data").load_sync() == []

    fake_llm.push(Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})]), "done")
    write_atomic(
        api.tmp / "data" / "spool" / "in" / "m1.json",
        {"session": "side", "sender": "tester", "text": "run it"},
    )
    await api.runs[-1].wait_event("approval_asked")  # the question is on disk, waiting
    text = await browser.goto(f"{api.url}/")
    assert "Run shell: echo ran >> ran.txt?" in text, text
    await browser.screenshot(ARTIFACTS / "3-approval.png")
    text = await browser.navigating(_click('form[action$="/yes"] button'))
    assert "Pending approvals" in text
    marker = api.tmp / "ws" / "ran.txt"
    wait_until(marker.exists, "the approved command run")
    await browser.screenshot(ARTIFACTS / "4-approved.png")
    out = api.tmp / "data" / "spool" / "out"
    wait_until(lambda: any("done" in p.read_text() for p in out.glob("m1.*.json")), "the reply")
    assert marker.read_text() == "ran\n"


def _click(selector: str) -> str:
    return f"document.querySelector({selector!r}).click()"
