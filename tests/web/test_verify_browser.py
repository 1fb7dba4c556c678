"""A Matrix verification confirmed from the dashboard, in Chromium: a person on a current
Element (matrix-js-sdk, Rust crypto) on the real Synapse asks to verify the bot; the
operator's page shows the same emoji her client shows, "They match" is clicked, she
confirms too, and both ends are verified: the flow of `squidd matrix verify`, from the
page. Screenshots at 1280 and 390 px go to test-artifacts/dashboard/."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from squidd.config.api import new_key
from tests.channels.api.support import free_port, write_keys
from tests.servers.chromium.browser import Browser, chromium
from tests.servers.element.client import ElementClient
from tests.servers.synapse.server import User
from tests.support.matrix import bot as bot
from tests.support.matrix import make_element as make_element
from tests.support.matrix import make_user as make_user
from tests.support.matrix import squidds as squidds
from tests.support.matrix import uid as uid
from tests.support.matrix_daemon import MatrixSquidd
from tests.support.matrix_daemon import matrix_squidd as matrix_squidd
from tests.web.test_acceptance_browser import both, click

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.matrix,
    pytest.mark.slow,
    pytest.mark.skipif(chromium() is None, reason="chromium is not installed (not root?)"),
]


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    driven = Browser(tmp_path / "chromium-profile")
    try:
        await driven.start()
        yield driven
    finally:
        await driven.close()


async def test_a_verification_is_confirmed_from_the_page(
    bot: User, make_element: Any, matrix_squidd: MatrixSquidd, browser: Browser, tmp_path: Path
) -> None:
    alice: ElementClient = await make_element("alice")
    key, port = new_key(), free_port()
    api = {
        "enabled": True,
        "listen": f"127.0.0.1:{port}",
        "keys_file": write_keys(tmp_path / "keys", key),
    }
    await matrix_squidd.start(alice.user_id, "squidd.log", api=api)
    url = f"http://127.0.0.1:{port}"
    room = await alice.create_dm(bot.user_id)
    await alice.wait_joined(room, bot.user_id)
    [device] = await alice.wait_devices(bot.user_id)

    flow = await alice.request_verification(bot.user_id, device_id=str(device))
    await alice.wait_verification(flow_id=flow["flow_id"], phase="Ready")
    await alice.start_sas(flow["flow_id"])
    shown = await alice.wait_verification(flow_id=flow["flow_id"], sas=True)

    await browser.viewport(1280, 900)
    await browser.goto(f"{url}/")
    await browser.navigating(
        f"document.querySelector('input[name=key]').value = {key!r};"
        "document.querySelector('form[action=\"/login\"]').submit()"
    )
    text = await browser.goto(f"{url}/operator")
    names = [name for _, name in shown["emoji"]]
    on_page = await browser.evaluate(
        "[...document.querySelectorAll('ul.emoji li')].map(li => li.lastChild.textContent.trim())"
    )
    assert on_page == names, (on_page, shown, text)
    assert " ".join(map(str, shown["decimal"])) in text, text
    await both(browser, "9-verification")

    text = await browser.navigating(click('form[action$="/match"] button'))
    assert "They match" not in text, text
    await alice.confirm_sas(flow["flow_id"])
    done = await alice.wait_verification(flow_id=flow["flow_id"], phase="Done")
    assert done["cancel_code"] is None, done
    assert (await alice.wait_user_verified(bot.user_id))["verified"]
    after = await alice.device_trust(bot.user_id, str(device))
    assert after is not None and after["cross_signing_verified"], after
    await both(browser, "10-verified")
