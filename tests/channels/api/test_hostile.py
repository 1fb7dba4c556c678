"""Hostile input at the API channel of a running `squidd run`: oversized bodies, malformed
JSON, wrong content types, keys where they do not belong, foreign Host/Origin, path
traversal in conversation names, and 1,000 connections at once while another channel
(the spool test channel) keeps being answered, with the daemon's memory bounded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream

from tests.channels.api.support import ApiDaemon
from tests.faults.harness import wait_until
from tests.support.daemon import SPOOL
from tests.support.fake_llm import FakeLLM
from tests.support.spool_channel import write_atomic

pytestmark = pytest.mark.anyio
CHAT = "/v1/chat/completions"
HELLO = {"model": "squidd", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def api(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[ApiDaemon]:
    daemon = ApiDaemon(tmp_path, fake_llm.base_url, channel=SPOOL, requests_per_minute=10_000)
    try:
        await daemon.start()
        yield daemon
    finally:
        daemon.close()


def assert_openai_error(body: dict[str, object], code: str) -> None:
    error = body["error"]
    assert isinstance(error, dict), body
    assert error["code"] == code, body
    assert isinstance(error["message"], str) and error["type"]


async def test_bad_requests_are_refused_in_the_openai_error_shape(api: ApiDaemon) -> None:
    async with api.http() as http:
        big = b'{"messages": [{"role": "user", "content": "' + b"x" * (1024 * 1024) + b'"}]}'
        too_big = await http.post(
            CHAT, content=big, headers=api.auth(**{"Content-Type": "application/json"})
        )
        assert too_big.status_code == 413
        assert_openai_error(too_big.json(), "body_too_large")
        broken = await http.post(
            CHAT, content=b"{not json", headers=api.auth(**{"Content-Type": "application/json"})
        )
        assert broken.status_code == 400
        assert_openai_error(broken.json(), "invalid_json")
        for content_type in (
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ):
            wrong = await http.post(
                CHAT, content=json.dumps(HELLO), headers=api.auth(**{"Content-Type": content_type})
            )
            assert wrong.status_code == 415, content_type
        for shape in (
            [],
            {"messages": []},
            {"messages": [{"role": "system", "content": "x"}]},
            {"messages": [{"role": "user", "content": 5}]},
            {**HELLO, "stream": "yes"},
        ):
            odd = await http.post(CHAT, json=shape, headers=api.auth())
            assert odd.status_code == 400, shape
            assert_openai_error(odd.json(), "invalid_request")
        missing = await http.get("/v1/nothing", headers=api.auth())
        assert missing.status_code == 404
    assert api.runs[-1].proc.poll() is None


async def test_keys_are_needed_and_never_taken_from_a_query_string(api: ApiDaemon) -> None:
    async with api.http() as http:
        for headers in (
            {},
            {"Authorization": "Bearer sqd-wrong-key-0123456789"},
            {"Authorization": api.key},
            {"Authorization": f"Basic {api.key}"},
        ):
            refused = await http.post(CHAT, json=HELLO, headers=headers)
            assert refused.status_code == 401, headers
            assert_openai_error(refused.json(), "invalid_api_key")
        models = await http.get("/v1/models")
        assert models.status_code == 401
        for query in (f"api_key={api.key}", f"key={api.key}", "x=1"):
            in_query = await http.post(f"{CHAT}?{query}", json=HELLO, headers=api.auth())
            assert in_query.status_code == 400, query
            assert_openai_error(in_query.json(), "query_not_accepted")
    assert api.key not in api.runs[-1].log_text()


async def test_a_browser_gets_a_refusal_page_naming_the_fix(api: ApiDaemon) -> None:
    """A person sent to the dashboard with a query string or under a LAN name reads what
    was refused and what to change; an API client still gets the OpenAI-shaped JSON."""
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    async with api.http() as http:
        query = await http.get("/?next=/memory", headers=browser)
        assert query.status_code == 400
        assert query.headers["content-type"].startswith("text/html")
        assert "query string" in query.text and "<h1>" in query.text
        lan = await http.get("/", headers={**browser, "Host": f"192.168.1.20:{api.port}"})
        assert lan.status_code == 403
        assert lan.headers["content-type"].startswith("text/html")
        assert "api.allowed_hosts" in lan.text and "(192.168.1.20)" in lan.text
        assert f"http://127.0.0.1:{api.port}/" in lan.text
        client = await http.post(f"{CHAT}?x=1", json=HELLO, headers={**api.auth(), **browser})
        assert_openai_error(client.json(), "query_not_accepted")


async def test_foreign_host_or_origin_is_refused(api: ApiDaemon) -> None:
    async with api.http() as http:
        rebound = await http.post(
            CHAT, json=HELLO, headers=api.auth(Host=f"evil.example:{api.port}")
        )
        assert rebound.status_code == 403
        cross = await http.post(CHAT, json=HELLO, headers=api.auth(Origin="http://evil.example"))
        assert cross.status_code == 403
        local = await http.post(
            CHAT, json=HELLO, headers=api.auth(Origin=f"http://localhost:{api.port}")
        )
        assert local.status_code == 200, local.text


async def test_conversation_names_cannot_leave_the_data_dir(api: ApiDaemon, tmp_path: Path) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    async with api.http() as http:
        for name in ("../../etc/passwd", "..", "a/b", "/abs", "a\\b", ".hidden", "x" * 65, "é"):
            by_header = (
                await http.post(
                    CHAT, json=HELLO, headers=api.auth(**{"X-Squidd-Conversation": name})
                )
                if name.isascii()
                else None
            )
            if by_header is not None:
                assert by_header.status_code == 400, name
                assert_openai_error(by_header.json(), "invalid_conversation")
            by_user = await http.post(CHAT, json={**HELLO, "user": name}, headers=api.auth())
            assert by_user.status_code == 400, name
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_a_thousand_connections_leave_memory_bounded_and_other_channels_answered(
    api: ApiDaemon,
) -> None:
    run = api.runs[-1]
    before = rss_kib(run.proc.pid)
    held: list[SocketStream] = []
    try:
        for n in range(1000):
            stream = await anyio.connect_tcp("127.0.0.1", api.port)
            # Half a request each: the server holds the connection, waiting for the rest.
            await stream.send(f"POST {CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-N: {n}\r\n".encode())
            held.append(stream)
        write_atomic(
            api.tmp / "data" / "spool" / "in" / "m1.json",
            {"session": "side", "sender": "tester", "text": "still there?"},
        )
        out = api.tmp / "data" / "spool" / "out"
        wait_until(lambda: out.exists() and any(out.glob("m1.*.json")), "the spool reply")
        async with api.http() as http:
            answered = await http.post(CHAT, json=HELLO, headers=api.auth())
            assert answered.status_code == 200
        grown_mib = (rss_kib(run.proc.pid) - before) / 1024
        print(f"RSS growth with 1,000 open connections: {grown_mib:.1f} MiB")
        assert grown_mib < 64, grown_mib
    finally:
        for stream in held:
            await stream.aclose()
    assert run.proc.poll() is None
