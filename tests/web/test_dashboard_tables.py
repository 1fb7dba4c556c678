"""Every table on every dashboard page has as many cells in each row as it has headers: the
pages are reached by following the dashboard's own links from the overview, with something
in every table (a channel, a waiting approval, a cron job, sessions, an audit entry), and
parsed as HTML."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html.parser import HTMLParser

import anyio
import httpx2
import pytest

from squidd.core.cron import make_job
from squidd.store.cron_jobs import JobsFile
from tests.channels.api.support import ApiDaemon
from tests.faults.harness import wait_until
from tests.support.dashboard import FORM, log_in
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_channel import write_atomic

pytestmark = pytest.mark.anyio


class _Tables(HTMLParser):
    """The tables of a page: for each, its header count and each row's cell count."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[int, list[int]]] = []
        self.links: list[str] = []
        self._open: list[tuple[list[int], list[int]]] = []  # (header counts, row counts)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links += [v for k, v in attrs if k == "href" and v is not None]
        elif tag == "table":
            self._open.append(([], []))
        elif tag == "tr" and self._open:
            self._open[-1][1].append(0)
        elif tag in ("td", "th") and self._open and self._open[-1][1]:
            heads, rows = self._open[-1]
            rows[-1] += 1
            if tag == "th":
                heads.append(len(rows) - 1)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._open:
            heads, rows = self._open.pop()
            assert set(heads) == {0}, f"headers outside the first row: {heads}"
            self.tables.append((rows[0], rows[1:]))


def _parse(text: str) -> _Tables:
    parser = _Tables()
    parser.feed(text)
    parser.close()
    return parser


def test_the_parser_sees_a_row_with_a_cell_too_many() -> None:
    tables = _parse(
        "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr>"
        "<tr><td>1</td><td>2</td><td>3</td></tr></table>"
    ).tables
    assert tables == [(2, [2, 3])]


async def _page_until(http: httpx2.AsyncClient, path: str, shows: str) -> str:
    with anyio.fail_after(60):
        while True:
            text = (await http.get(path)).text
            if shows in text:
                return text
            await anyio.sleep(0.05)


async def _fill_every_table(api: ApiDaemon, http: httpx2.AsyncClient, csrf: str) -> None:
    """An audit entry (a shell call approved from the page), a question still waiting, a
    cron job, and with them sessions."""
    inbox = api.tmp / "data" / "spool" / "in"
    write_atomic(inbox / "m1.json", {"session": "one", "sender": "tester", "text": "run it"})
    home = await _page_until(http, "/", "Run shell: echo one?")
    found = re.search(r'action="(/approvals/[0-9a-f]+/yes)"', home)
    assert found is not None, home
    assert (await http.post(found.group(1), data={"csrf": csrf}, headers=FORM)).status_code == 303
    out = api.tmp / "data" / "spool" / "out"
    wait_until(lambda: any("done" in p.read_text() for p in out.glob("m1.*.json")), "the reply")
    write_atomic(inbox / "m2.json", {"session": "two", "sender": "tester", "text": "and this"})
    await _page_until(http, "/", "Run shell: echo two?")
    job = make_job("weekly", "tidy", every="168h", timezone="UTC", target="", now=datetime.now(UTC))
    JobsFile(api.tmp / "data").modify_sync(lambda jobs: [*jobs, job])


async def test_every_row_of_every_table_has_a_cell_per_header(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    shell = [Reply(tool_calls=[("shell", {"command": f"echo {n}"})]) for n in ("one", "two")]
    fake_llm.push(shell[0], "done", shell[1])
    async with api.http() as http:
        csrf = await log_in(http, api.key)
        await _fill_every_table(api, http, csrf)
        seen: dict[str, list[tuple[int, list[int]]]] = {}
        todo = ["/"]
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            response = await http.get(path)
            assert response.status_code == 200, (path, response.text)
            parsed = _parse(response.text)
            seen[path] = parsed.tables
            todo += [link for link in parsed.links if link.startswith("/")]
    assert {"/", "/sessions", "/audit"} <= set(seen), seen.keys()
    # five tables of the status, and the numbers of eight charts
    assert len(seen["/"]) == 13 and len(seen["/sessions"]) == 1 and len(seen["/audit"]) == 1
    for path, tables in seen.items():
        for heads, rows in tables:
            assert rows, (path, "a table without rows")
            assert rows == [heads] * len(rows), (path, heads, rows)
