"""The dashboard on a running `squidd run` (API on, the spool test channel beside it),
over HTTP: only the login form without a key; a key buys an HttpOnly SameSite=Strict
session; the overview shows the channels; a POST without the CSRF token, a foreign Host or
Origin and a key in a query string are refused; a pending shell call is approved from the
page and runs once."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from squidd.core.cron import make_job
from squidd.store.cron_jobs import JobsFile
from tests.channels.api.support import ApiDaemon
from tests.faults.harness import wait_until
from tests.support.dashboard import FORM, add_job, csrf_of, log_in
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.spool_channel import write_atomic

pytestmark = pytest.mark.anyio
CSP = "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"


async def test_without_a_key_only_the_login_form(api: ApiDaemon) -> None:
    async with api.http() as http:
        home = await http.get("/")
        assert home.status_code == 200
        assert home.headers["content-security-policy"] == CSP
        assert "name=key" in home.text and "Channels" not in home.text
        assert "<script" not in home.text
        memory = await http.get("/memory")
        assert "name=key" in memory.text and "<pre>" not in memory.text
        wrong = await http.post(
            "/login",
            data={"csrf": csrf_of(memory.text), "key": "sqd-not-a-key-0123456789"},
            headers=FORM,
        )
        assert "not one of the API keys" in wrong.text and "squidd_session" not in str(
            wrong.headers
        )
        no_csrf = await http.post("/login", data={"key": api.key}, headers=FORM)
        assert no_csrf.status_code == 403


async def test_logged_in_sees_channels_and_forms_need_the_csrf_token(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    fake_llm.push(Reply(content="hello", usage=(30, 12, 0)))
    async with api.http() as http:
        csrf = await log_in(http, api.key)
        home = await http.get("/")
        assert re.search(r"<td>api</td><td>connected</td>", home.text), home.text
        assert re.search(r"<td>spool</td><td>connected</td>", home.text), home.text
        refused = await http.post("/logout", data={}, headers=FORM)
        assert refused.status_code == 403
        refused = await http.post("/logout", data={"csrf": "forged"}, headers=FORM)
        assert refused.status_code == 403
        rebound = await http.get("/", headers={"Host": f"evil.example:{api.port}"})
        assert rebound.status_code == 403
        cross = await http.post(
            "/logout", data={"csrf": csrf}, headers={**FORM, "Origin": "http://evil.example"}
        )
        assert cross.status_code == 403
        async with api.client() as client:
            await client.chat.completions.create(
                model="squidd", messages=[{"role": "user", "content": "hi"}], user="desk"
            )
        sessions = await http.get("/sessions")
        found = re.search(r'<a href="/sessions/(api_desk-[0-9a-f]{20})">', sessions.text)
        assert found is not None, sessions.text
        one = await http.get(f"/sessions/{found.group(1)}")
        assert "2 messages" in one.text and "1 model calls, 42 tokens" in one.text, one.text
        assert "Conversation api:desk" in one.text
        assert (await http.get("/sessions/..%2F..%2Fetc")).status_code == 404
        in_query = await http.get(f"/?key={api.key}")
        assert in_query.status_code == 400
        out = await http.post("/logout", data={"csrf": csrf}, headers=FORM)
        assert out.status_code == 303
        assert "name=key" in (await http.get("/")).text


async def test_a_pending_shell_call_is_approved_from_the_page(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    fake_llm.push(Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})]), "done")
    write_atomic(
        api.tmp / "data" / "spool" / "in" / "m1.json",
        {"session": "side", "sender": "tester", "text": "run it"},
    )
    async with api.http() as http:
        csrf = await log_in(http, api.key)
        wait_until(lambda: (api.tmp / "data" / "approvals").exists(), "the question", 60)
        page = ""
        with anyio.fail_after(60):
            while "Run shell: echo ran &gt;&gt; ran.txt?" not in page:
                await anyio.sleep(0.05)
                page = (await http.get("/")).text
        found = re.search(r'action="(/approvals/[0-9a-f]+/yes)"', page)
        assert found is not None, page
        approved = await http.post(found.group(1), data={"csrf": csrf}, headers=FORM)
        assert approved.status_code == 303
    marker = api.tmp / "ws" / "ran.txt"
    wait_until(lambda: marker.exists(), "the command run")
    out = api.tmp / "data" / "spool" / "out"
    wait_until(lambda: any("done" in p.read_text() for p in out.glob("m1.*.json")), "the reply")
    assert marker.read_text() == "ran\n"
    async with api.http() as http:
        await log_in(http, api.key)
        audit = await http.get("/audit")
        assert "the chain holds: 1 entries" in audit.text, audit.text
        assert "<td>shell</td><td>approved</td><td>dashboard</td>" in audit.text, audit.text


async def test_a_cron_job_runs_now_from_the_page(tmp_path: Path, fake_llm: FakeLLM) -> None:
    daemon = ApiDaemon(tmp_path, fake_llm.base_url)
    add_job(tmp_path / "data", "weekly", "tidy the notes now", every="168h")
    try:
        await daemon.start()
        async with daemon.http() as http:
            csrf = await log_in(http, daemon.key)
            refused = await http.post("/cron/weekly/run", data={}, headers=FORM)
            assert refused.status_code == 403
            ran = await http.post("/cron/weekly/run", data={"csrf": csrf}, headers=FORM)
            assert ran.status_code == 303
        with anyio.fail_after(60):
            while not any(  # noqa: ASYNC110 - the model server's record, polled
                "tidy the notes now" in str(r["messages"][-1].get("content"))
                for r in fake_llm.chat_requests
            ):
                await anyio.sleep(0.05)
    finally:
        daemon.close()


async def test_the_cron_forms_say_the_cron_service_s_words(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Pause and resume keep the job's schedule; a job that is not there is refused with the
    same words as `squidd cron` and the agent's tools get (before, the page said nothing)."""
    daemon = ApiDaemon(tmp_path, fake_llm.base_url)
    job = make_job("weekly", "tidy", every="168h", timezone="UTC", target="", now=datetime.now(UTC))
    jobs = JobsFile(tmp_path / "data")
    jobs.modify_sync(lambda found: [*found, job])
    try:
        await daemon.start()
        async with daemon.http() as http:
            csrf = await log_in(http, daemon.key)
            for change in ("pause", "resume", "run", "remove"):
                gone = await http.post(f"/cron/nope/{change}", data={"csrf": csrf}, headers=FORM)
                assert gone.status_code == 404, (change, gone.text)
                assert "no job named &#39;nope&#39;" in gone.text, gone.text
                assert gone.headers["content-security-policy"] == CSP
            assert (
                await http.post("/cron/weekly/nap", data={"csrf": csrf}, headers=FORM)
            ).status_code == 404
            paused = await http.post("/cron/weekly/pause", data={"csrf": csrf}, headers=FORM)
            assert paused.status_code == 303
            assert jobs.load_sync() == [replace(job, paused=True)]
            resumed = await http.post("/cron/weekly/resume", data={"csrf": csrf}, headers=FORM)
            assert resumed.status_code == 303
            assert jobs.load_sync() == [job]
            refused = await http.post("/cron/weekly/remove", data={}, headers=FORM)
            assert refused.status_code == 403 and jobs.load_sync() == [job]
    finally:
        daemon.close()


async def test_memory_is_edited_only_after_a_confirmation(api: ApiDaemon) -> None:
    new = "The owner <b>waters</b> the plants on Sundays.\n"
    async with api.http() as http:
        csrf = await log_in(http, api.key)
        before = await http.get("/memory")
        assert "<textarea id=memory-text name=text" in before.text
        refused = await http.post("/memory", data={"text": new, "confirm": "yes"}, headers=FORM)
        assert refused.status_code == 403
        asked = await http.post("/memory", data={"csrf": csrf, "text": new}, headers=FORM)
        assert "Replace MEMORY.md with this text?" in asked.text
        assert "&lt;b&gt;waters&lt;/b&gt;" in asked.text and "<b>waters" not in asked.text
        assert "&lt;b&gt;waters" not in (await http.get("/memory")).text  # not saved yet
        saved = await http.post(
            "/memory", data={"csrf": csrf, "text": new, "confirm": "yes"}, headers=FORM
        )
        assert saved.status_code == 303
        assert "&lt;b&gt;waters&lt;/b&gt;" in (await http.get("/memory")).text
    assert (api.tmp / "ws" / "MEMORY.md").read_text() == new


async def test_an_api_turn_waiting_for_approval_streams_the_question_then_the_reply(
    api: ApiDaemon, fake_llm: FakeLLM
) -> None:
    fake_llm.push(Reply(tool_calls=[("shell", {"command": "echo ran >> ran.txt"})]), "done")
    body = {"model": "squidd", "stream": True, "messages": [{"role": "user", "content": "do"}]}
    headers = api.auth(**{"Idempotency-Key": "approve-me"})
    seen: list[str] = []
    async with api.http() as http, api.http() as dashboard:
        csrf = await log_in(dashboard, api.key)
        async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            async for line in r.aiter_lines():
                seen.append(line)
                found = re.search(r"Approval needed \(([0-9a-f]+)\)", line)
                if found:
                    yes = f"/approvals/{found.group(1)}/yes"
                    done = await dashboard.post(yes, data={"csrf": csrf}, headers=FORM)
                    assert done.status_code == 303
    stream = "\n".join(seen)
    assert "Run shell: echo ran >> ran.txt?" in stream and '"content": "\\n\\ndone"' in stream
    assert seen[-1] == "data: [DONE]" or "data: [DONE]" in seen
    assert (api.tmp / "ws" / "ran.txt").read_text() == "ran\n"
    async with api.client() as client:
        again = await client.chat.completions.create(
            model="squidd",
            messages=[{"role": "user", "content": "do"}],
            extra_headers={"Idempotency-Key": "approve-me"},
        )
    text = again.choices[0].message.content or ""
    assert text.startswith("Approval needed") and text.endswith("\n\ndone")
