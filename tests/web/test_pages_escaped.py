"""No dashboard page shows a raw JSON dump, and hostile text (a session name, a message
and a cron job's prompt with `<script>`, quotes, an RTL override and a lone surrogate) is
shown escaped on every page: as text, its direction change visible, the page valid UTF-8.

The pages are reached by following the dashboard's own links from the overview of a
running daemon. The rendering itself is tested over any text (hypothesis): whatever goes
into a template comes out as that text, never as markup."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squidd.web.render import render_text, shown
from tests.channels.api.support import ApiDaemon
from tests.faults.harness import wait_until
from tests.support.dashboard import add_job, crawl, log_in, page_text
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_channel import write_atomic

pytestmark = pytest.mark.anyio
WEB = Path(__file__).parents[2] / "src" / "squidd" / "web"
CHAT_SCRIPT = '<script src="/chat.js" defer></script>'
HOSTILE = "<script>alert(1)</script>\"'&\u202etxt.exe\ud800"


def json_dumps_in(texts: list[str]) -> list[str]:
    """The JSON objects, and arrays holding objects or arrays, in a page's text nodes. A
    flat array of words (`["shell"]`) is left alone: it is also how a config value the
    doctor tells you to write reads (TOML), not a structure dumped."""
    decoder = json.JSONDecoder()
    found: list[str] = []
    for text in texts:
        at = 0
        while at < len(text):
            if text[at] not in "{[":
                at += 1
                continue
            try:
                value, end = decoder.raw_decode(text, at)
            except ValueError:
                at += 1
                continue
            nested = isinstance(value, list) and any(isinstance(v, dict | list) for v in value)
            if (isinstance(value, dict) and value) or nested:
                found.append(text[at:end])
            at = end
    return found


def test_a_json_dump_is_seen() -> None:
    old = '<h2>Turns</h2><code>{"in_flight": 0, "queued": 0}</code><p>[{"a": [1]}]</p>'
    assert json_dumps_in(page_text(old).texts) == ['{"in_flight": 0, "queued": 0}', '[{"a": [1]}]']
    assert json_dumps_in(page_text('<p>"x" = ["shell"]</p>').texts) == []
    assert json_dumps_in(page_text("<p>a {brace} and [x] and [] {}</p>").texts) == []


def test_no_template_turns_escaping_off() -> None:
    for path in (WEB / "pages").glob("*.html"):
        text = path.read_text()
        assert "|safe" not in text.replace(" ", "") and "autoescape false" not in text, path
    for path in WEB.glob("*.py"):
        assert "Markup(" not in path.read_text(), path


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text += data


@given(st.text())
def test_any_text_comes_out_of_a_template_as_that_text(text: str) -> None:
    page = render_text("message.html", title="t", back="/", message=text)
    page.encode("utf-8")  # no lone surrogate left
    parsed = _Elements()
    parsed.feed(page)
    parsed.close()
    plain = render_text("message.html", title="t", back="/", message="")
    reference = _Elements()
    reference.feed(plain)
    reference.close()
    assert parsed.tags == reference.tags
    assert shown(text).replace("\r\n", "\n").replace("\r", "\n") in parsed.text.replace("\r", "\n")


async def test_no_page_has_a_json_dump_and_hostile_text_is_escaped_everywhere(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    fake_llm.push(Reply(content="an answer about " + HOSTILE, usage=(20, 5, 0)))
    add_job(api.tmp / "data", "hostile", HOSTILE, every="12h")
    write_atomic(
        api.tmp / "data" / "spool" / "in" / "m1.json",
        {"session": HOSTILE, "sender": "tester", "text": "hello " + HOSTILE},
    )
    out = api.tmp / "data" / "spool" / "out"
    wait_until(lambda: any(out.glob("m1.*.json")), "the reply")
    async with api.http() as http:
        await log_in(http, api.key)
        pages = await crawl(http)
    assert any(p.startswith("/sessions/") for p in pages), pages.keys()
    shown_on: list[str] = []
    for path, response in pages.items():
        if not response.headers["content-type"].startswith("text/html"):
            continue
        body = response.content.decode("utf-8")  # strict: a lone surrogate would fail here
        # the chat's own script, served by squidd, is the only one
        assert "<script" not in body.replace(CHAT_SCRIPT, ""), path
        assert "\u202e" not in body, path
        texts = page_text(body).texts
        assert json_dumps_in(texts) == [], (path, json_dumps_in(texts))
        if any("<script>alert(1)</script>\"'&[U+202E]txt.exe\ufffd" in t for t in texts):
            shown_on.append(path)
    # the job's prompt on the overview; the session's name in the list and on its page,
    # where the message and the answer are shown too
    assert "/" in shown_on and "/sessions" in shown_on, shown_on
    [conversation] = [p for p in shown_on if p.startswith("/sessions/")]
    texts = page_text(pages[conversation].text).texts
    assert "hello <script>alert(1)</script>\"'&[U+202E]txt.exe\ufffd" in texts, texts
