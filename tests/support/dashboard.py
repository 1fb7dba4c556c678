"""The dashboard of a running `squidd run` for the tests that use it over HTTP: a daemon
with the API on, the spool channel beside it and the shell behind an approval; the login
with an API key and the CSRF token of a page's forms."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import httpx2

from squidd.core.cron import make_job
from squidd.store.cron_jobs import JobsFile
from tests.channels.api.support import ApiDaemon
from tests.support.daemon import SPOOL

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def shell_api_daemon(tmp_path: Path, llm_url: str, **more: dict[str, object]) -> ApiDaemon:
    """The daemon (not started) with a workspace, the shell on and every call asked, and
    `more` config sections."""
    (tmp_path / "ws").mkdir()
    sections = {
        "agents": {"workspace": str(tmp_path / "ws")},
        "tools.shell": {"enabled": True},
        "tools.policy": {"default_deny": []},
        "tools.approval": {"timeout_s": 600},
        **more,
    }
    return ApiDaemon(tmp_path, llm_url, channel=SPOOL, sections=sections)


def csrf_of(text: str) -> str:
    found = re.search(r'name=csrf value="([^"]+)"', text)
    assert found is not None, text
    return found.group(1)


async def log_in(http: httpx2.AsyncClient, key: str) -> str:
    """Log in; the session's CSRF token (from the overview's forms)."""
    form = await http.get("/")
    token = csrf_of(form.text)
    done = await http.post("/login", data={"csrf": token, "key": key}, headers=FORM)
    assert done.status_code == 303, done.text
    cookie = done.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie, cookie
    home = await http.get("/")
    assert ">Channels</h2>" in home.text
    return csrf_of(home.text)


def add_job(data: Path, name: str, prompt: str, every: str) -> None:
    """A cron job every `every` (UTC, no target) put in the jobs file before a start."""
    job = make_job(name, prompt, every=every, timezone="UTC", target="", now=datetime.now(UTC))
    JobsFile(data).modify_sync(lambda jobs: [*jobs, job])


class PageText(HTMLParser):
    """A page's text (each text node, character references resolved) and its links."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links += [v for k, v in attrs if k == "href" and v is not None]

    def handle_data(self, data: str) -> None:
        self.texts.append(data)


def page_text(html: str) -> PageText:
    parser = PageText()
    parser.feed(html)
    parser.close()
    return parser


async def crawl(http: httpx2.AsyncClient, start: str = "/") -> dict[str, httpx2.Response]:
    """Every page reached from `start` by the dashboard's own links (GET only)."""
    seen: dict[str, httpx2.Response] = {}
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        response = await http.get(path)
        assert response.status_code == 200, (path, response.text)
        seen[path] = response
        if response.headers.get("content-type", "").startswith("text/html"):
            todo += [link for link in page_text(response.text).links if link.startswith("/")]
    return seen
