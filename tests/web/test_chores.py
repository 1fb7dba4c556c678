"""The operator's chores on the dashboard of a running `squidd run`: a parked message is
listed with its reason, retried from the page and answered; dropping one asks once more;
a backup is made from the page and listed; the doctor's checks have a page; the channels'
state and the audit chain's are shown. Every change needs the CSRF token."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from squidd.core.models import Inbound, SessionId
from squidd.core.poison import Parked, parked_id
from squidd.store.parked import ParkedDir
from tests.channels.api.support import ApiDaemon
from tests.faults.harness import wait_until
from tests.support.daemon import SPOOL
from tests.support.dashboard import FORM, log_in, page_text
from tests.support.fake_llm import FakeLLM

pytestmark = pytest.mark.anyio


def park(data: Path, source_id: str, text: str) -> str:
    inbound = Inbound("spool", source_id, SessionId("side"), "tester", text)
    item = Parked(
        id=parked_id("spool", source_id),
        loop="message",
        channel="spool",
        source_id=source_id,
        session_id="side",
        reason="DeliveryError: the reply could not be written",
        error="DeliveryError",
        attempts=3,
        inbound=inbound,
    )
    ParkedDir(data).park_sync(item)
    return item.id


@pytest.fixture
async def chores(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[ApiDaemon]:
    sections = {
        "gateway": {"shutdown_grace_s": 2, "parked_poll_s": 0.2},
        "backup": {"dir": str(tmp_path / "backups")},
    }
    daemon = ApiDaemon(tmp_path, fake_llm.base_url, channel=SPOOL, sections=sections)
    try:
        yield daemon
    finally:
        daemon.close()


async def test_a_parked_message_is_retried_from_the_page_and_answered(
    chores: ApiDaemon, fake_llm: FakeLLM
) -> None:
    data = chores.tmp / "data"
    retried = park(data, "m9", "hello again")
    dropped = park(data, "m8", "never mind")
    fake_llm.push("answered at last")
    await chores.start()
    async with chores.http() as http:
        csrf = await log_in(http, chores.key)
        page = (await http.get("/operator")).text
        texts = page_text(page).texts
        assert retried in texts and "DeliveryError: the reply could not be written" in texts
        assert re.search(r"<td>spool</td><td>channel</td><td>connected</td>", page), page
        assert "the chain holds: 0 entries" in page, page

        assert (
            await http.post(f"/parked/{retried}/retry", data={}, headers=FORM)
        ).status_code == 403
        done = await http.post(f"/parked/{retried}/retry", data={"csrf": csrf}, headers=FORM)
        assert done.status_code == 303
        out = data / "spool" / "out"
        wait_until(
            lambda: any("answered at last" in p.read_text() for p in out.glob("m9.*.json")),
            "the retried message answered",
        )
        wait_until(lambda: [i.id for i in ParkedDir(data).list_sync()] == [dropped], "unparked")
        assert retried not in page_text((await http.get("/operator")).text).texts

        asked = await http.post(f"/parked/{dropped}/drop", data={"csrf": csrf}, headers=FORM)
        assert asked.status_code == 200 and "cannot be sent again after this" in asked.text
        assert [i.id for i in ParkedDir(data).list_sync()] == [dropped]
        gone = await http.post(
            f"/parked/{dropped}/drop", data={"csrf": csrf, "confirm": "yes"}, headers=FORM
        )
        assert gone.status_code == 303
        assert ParkedDir(data).list_sync() == []
        unknown = await http.post(f"/parked/{dropped}/retry", data={"csrf": csrf}, headers=FORM)
        assert unknown.status_code == 404


async def test_a_backup_is_made_from_the_page_and_the_doctor_has_one(chores: ApiDaemon) -> None:
    await chores.start()
    async with chores.http() as http:
        csrf = await log_in(http, chores.key)
        assert "no backups in the backup folder" in (await http.get("/operator")).text
        made = await http.post("/backups/create", data={"csrf": csrf}, headers=FORM)
        assert made.status_code == 303
        [archive] = (chores.tmp / "backups").glob("squidd-backup-*.tar.gz")
        assert archive.name in page_text((await http.get("/operator")).text).texts
        doctor = (await http.get("/doctor")).text
        assert re.search(r"<tr><td>config</td><td>✓ ok</td><td>valid</td>", doctor), doctor
