"""The dashboard's conversations: the list (channel, with whom, last message, size), a
conversation's turns newest first a page at a time, its summary, each tool call with its
arguments and the audit line it left, and a search over every history (a POST with the
CSRF token, since the listener takes no query string)."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from squidd.core.models import Message
from squidd.fs import append_lines_locked, safe_name
from squidd.store.records import MESSAGE
from squidd.web.conversation import TURNS_PER_PAGE, lines_backwards, read_page
from tests.channels.api.support import ApiDaemon
from tests.faults.harness import wait_until
from tests.support.dashboard import FORM, log_in, page_text
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_channel import write_atomic

pytestmark = pytest.mark.anyio


def test_lines_come_last_first_across_blocks(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    lines = [f"line {n} " + "x" * (n % 97) for n in range(2000)]
    path.write_text("\n".join(lines) + "\n")
    assert [raw.decode() for raw in lines_backwards(path, block=512)] == lines[::-1]


def test_a_long_history_is_paged_by_turns_newest_first(tmp_path: Path) -> None:
    file = safe_name("api:desk")
    turns = TURNS_PER_PAGE + 2
    messages = []
    for n in range(turns):
        messages += [Message("user", f"question {n}"), Message("assistant", f"answer {n}")]
    append_lines_locked(
        tmp_path / "sessions" / f"{file}.jsonl", [MESSAGE.dumps(m) for m in messages]
    )
    first = read_page(tmp_path, file, "api:desk", 0)
    assert [[m.text for m in t] for t in first.turns[:2]] == [
        [f"question {turns - 1}", f"answer {turns - 1}"],
        [f"question {turns - 2}", f"answer {turns - 2}"],
    ]
    assert len(first.turns) == TURNS_PER_PAGE and first.more
    second = read_page(tmp_path, file, "api:desk", 1)
    assert [t[0].text for t in second.turns] == ["question 1", "question 0"]
    assert not second.more
    assert read_page(tmp_path, file, "api:desk", 2).turns == []


async def _page_until(http: object, path: str, shows: str) -> str:
    with anyio.fail_after(60):
        while True:
            text = (await http.get(path)).text  # type: ignore[attr-defined]
            if shows in text:
                return text
            await anyio.sleep(0.05)


async def test_read_a_conversation_its_tool_calls_audit_lines_summary_and_search(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    # Each call reports its usage, as real endpoints do: the ledger is where the dashboard
    # learns the name of a conversation whose history has not been consolidated yet.
    fake_llm.push(
        Reply(content="the kayak is booked", usage=(30, 5, 0)),
        Reply(tool_calls=[("shell", {"command": "echo ran"})], usage=(40, 5, 0)),
        Reply(content="done", usage=(50, 2, 0)),
    )
    async with api.client() as client:
        await client.chat.completions.create(
            model="squidd", messages=[{"role": "user", "content": "book the kayak"}], user="desk"
        )
    write_atomic(
        api.tmp / "data" / "spool" / "in" / "m1.json",
        {"session": "side", "sender": "tester", "text": "run it"},
    )
    desk = safe_name("api:desk")
    summary = api.tmp / "data" / "memory" / desk / "summary.md"
    summary.parent.mkdir(parents=True)
    summary.write_text("They like kayaks.\n")
    async with api.http() as http:
        csrf = await log_in(http, api.key)
        home = await _page_until(http, "/", "Run shell: echo ran?")
        found = re.search(r'action="(/approvals/[0-9a-f]+/yes)"', home)
        assert found is not None, home
        assert (
            await http.post(found.group(1), data={"csrf": csrf}, headers=FORM)
        ).status_code == 303
        out = api.tmp / "data" / "spool" / "out"
        wait_until(lambda: any("done" in p.read_text() for p in out.glob("m1.*.json")), "the reply")

        listing = (await http.get("/sessions")).text
        row = re.search(rf'<tr><td><a href="/sessions/{desk}">api:desk</a></td>(.*?)</tr>', listing)
        assert row is not None, listing
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
        assert cells[:3] == ["api", "desk", "assistant: the kayak is booked"], cells
        assert cells[3] == "2", cells

        one = (await http.get(f"/sessions/{desk}")).text
        texts = page_text(one).texts
        assert "book the kayak" in texts and "the kayak is booked" in texts
        assert "They like kayaks.\n" in texts

        side = (await http.get(f"/sessions/{safe_name('side')}")).text
        assert re.search(r"calls <strong>shell</strong>", side), side
        assert "<tr><td>command</td><td>echo ran</td></tr>" in side, side
        audit = re.search(r"<tr><td>[0-9T:.+-]+</td><td>approved</td><td>dashboard</td>", side)
        assert audit is not None, side
        assert side.index("run it") < side.index("echo ran") < side.index(">done<")

        refused = await http.post("/search", data={"q": "kayak"}, headers=FORM)
        assert refused.status_code == 403
        hits = (await http.post("/search", data={"csrf": csrf, "q": "kayak"}, headers=FORM)).text
        assert f'<a href="/sessions/{desk}">api:desk</a>' in hits, hits
        none = (await http.post("/search", data={"csrf": csrf, "q": "zebra"}, headers=FORM)).text
        assert "nothing found" in none
        assert (await http.get(f"/sessions/{desk}/page/1")).status_code == 404
