"""The dashboard's acceptance story in a real browser (headless Chromium over DevTools)
through `squidd run` with the scripted model: log in; the overview's usage chart draws 30
days of seeded ledger with bar heights that match it; the browser chat streams an answer
(held part way by the model, so a draft is seen before the whole), an approval is answered
in place and the command runs, `/new` starts afresh; the conversation is read with its
turns and tool call; a parked message is retried from the operator's page and answered.
Every page is screenshotted at 1280 and 390 px wide into test-artifacts/dashboard/.
The script-driven pages are read with `until`, which waits on the document's changes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.channels.api.support import ApiDaemon
from tests.faults.harness import wait_until
from tests.servers.chromium.browser import Browser, chromium
from tests.support.daemon import REPO
from tests.support.dashboard import shell_api_daemon
from tests.support.fake_llm import FakeLLM, Gate, Reply
from tests.support.ledger import PRICES, expected_bars, seed
from tests.web.test_chores import park

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(chromium() is None, reason="chromium is not installed (not root?)"),
]
ARTIFACTS = REPO / "test-artifacts" / "dashboard"
WIDTHS = ((1280, 900), (390, 844))
PLOT = 166.0
ANSWER = "Good morning! The kayak is booked for Saturday at nine."


@pytest.fixture
async def story(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[tuple[ApiDaemon, list]]:
    daemon = shell_api_daemon(
        tmp_path, fake_llm.base_url, gateway={"shutdown_grace_s": 2, "parked_poll_s": 0.2}
    )
    days = seed(tmp_path / "data")
    park(tmp_path / "data", "m9", "hello again")
    with (tmp_path / "config.toml").open("a") as config:
        config.write(PRICES + "\n[limits]\ndaily_tokens = 100000\n")
    try:
        await daemon.start()
        yield daemon, days
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


async def both(browser: Browser, name: str) -> None:
    """The page as it is, at 1280 and at 390 px wide."""
    for width, height in WIDTHS:
        await browser.viewport(width, height)
        await browser.screenshot(ARTIFACTS / f"{name}-{width}.png")
    await browser.viewport(*WIDTHS[0])


async def say(browser: Browser, text: str) -> None:
    await browser.evaluate(
        f"document.getElementById('chat-text').value = {json.dumps(text)};"
        "document.getElementById('chat-form').requestSubmit()"
    )


def click(selector: str) -> str:
    return f"document.querySelector({selector!r}).click()"


BUBBLES = "[...document.querySelectorAll('.msg.assistant:not(.draft) pre')].map(p => p.textContent)"


async def test_the_dashboard_story(
    story: tuple[ApiDaemon, list], browser: Browser, fake_llm: FakeLLM
) -> None:
    api, days = story
    await browser.viewport(*WIDTHS[0])
    text = await browser.goto(f"{api.url}/")
    assert "API key" in text
    await both(browser, "1-login")
    text = await browser.navigating(
        f"document.querySelector('input[name=key]').value = {api.key!r};"
        "document.querySelector('form[action=\"/login\"]').submit()"
    )
    assert "Usage, last 30 days" in text, text

    # The chart's bars, as the browser has them, against the ledger.
    bars = await browser.evaluate(
        "[...document.querySelectorAll('svg[data-chart=\"tokens-model\"] rect[data-value]')]"
        ".map(r => [r.dataset.day, r.dataset.label, +r.dataset.value, +r.getAttribute('height'),"
        " r.getBoundingClientRect().height])"
    )
    want = expected_bars(days)["tokens-model"]
    assert {(day, label): value for day, label, value, _, _ in bars} == want
    totals: dict[str, float] = {}
    for (day, _), value in want.items():
        totals[day] = totals.get(day, 0.0) + value
    top = max(totals.values())
    for _, _, value, height, drawn in bars:
        assert height == pytest.approx(value / top * PLOT, abs=0.01)
        assert drawn > 0
    await both(browser, "2-overview")

    # The chat: the answer streams (held part way by the model), then arrives whole.
    gate = Gate()
    fake_llm.push(
        Reply(content=ANSWER, gate=gate, gate_after=20, usage=(40, 12, 0)),
        Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})], usage=(60, 8, 0)),
        Reply(content="it ran", usage=(80, 3, 0)),
    )
    await browser.goto(f"{api.url}/chat")
    await say(browser, "good morning")
    draft = await browser.until("document.querySelector('.msg.draft pre')?.textContent")
    assert ANSWER.startswith(draft) and draft != ANSWER, draft
    await both(browser, "3-chat-streaming")
    gate.release.set()
    await browser.until(f"{BUBBLES}.includes({json.dumps(ANSWER)})")

    # An approval answered in place; the command runs and the answer comes.
    await say(browser, "run it")
    await browser.until("document.querySelector('.answers button[data-choice=yes]')")
    await both(browser, "4-chat-approval")
    await browser.evaluate(click(".answers button[data-choice=yes]"))
    await browser.until(f"{BUBBLES}.includes('it ran')")
    assert (api.tmp / "ws" / "ran.txt").read_text() == "ran\n"
    await say(browser, "/new")
    await browser.until(f"{BUBBLES}.some(t => t.startsWith('Started a new conversation'))")
    await both(browser, "5-chat-new")

    # The conversation, read: its turns and the tool call with its audit line.
    text = await browser.goto(f"{api.url}/sessions")
    assert "api:dashboard" in text, text
    text = await browser.navigating(click('a[href^="/sessions/api_dashboard"]'))
    assert "good morning" in text and ANSWER in text and "run it" in text, text
    assert "calls shell" in text and "approved\tdashboard" in text, text
    assert text.index("run it") < text.index("good morning")  # newest turn first
    await both(browser, "6-conversation")

    # A parked message retried from the operator's page, and answered.
    fake_llm.push("answered at last")
    text = await browser.goto(f"{api.url}/operator")
    assert "DeliveryError: the reply could not be written" in text, text
    await both(browser, "7-operator")
    await browser.navigating(click('form[action$="/retry"] button'))
    out = api.tmp / "data" / "spool" / "out"
    wait_until(
        lambda: any("answered at last" in p.read_text() for p in out.glob("m9.*.json")),
        "the retried message answered",
    )
    text = await browser.goto(f"{api.url}/operator")
    assert "DeliveryError" not in text, text
    await both(browser, "8-operator-after-retry")
