"""web_search against a loopback HTTP server that answers in each backend's documented JSON
format: SearXNG's `/search?format=json` and the Brave Search API's `/res/v1/web/search`.
(No internet here: neither service was tried for real; see docs/tools.md.)"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from structlog.testing import capture_logs

from squidd.config.tools import WebSearchSettings
from squidd.errors import ToolError
from squidd.tools.web_search import build_web_search
from tests.support.cli import config_check
from tests.support.config import write_config

pytestmark = pytest.mark.anyio

SEARXNG_ANSWER = {
    "query": "squid facts",
    "number_of_results": 0,
    "results": [
        {
            "url": "https://en.wikipedia.org/wiki/Squid",
            "title": "Squid - Wikipedia",
            "content": "Squids are cephalopods in the superorder Decapodiformes.",
            "engine": "wikipedia",
            "engines": ["wikipedia"],
            "score": 3.0,
            "category": "general",
        },
        {"url": "javascript:alert(1)", "title": "bad", "content": "dropped"},
        "not an object",
        {
            "url": "https://example.org/giant",
            "title": "Giant squid\u0000",
            "content": "x" * 1000,
        },
        {"url": "https://example.org/third", "title": "Third", "content": "three"},
    ],
    "answers": [],
    "suggestions": [],
    "unresponsive_engines": [],
}

BRAVE_ANSWER = {
    "type": "search",
    "query": {"original": "squid facts"},
    "web": {
        "type": "search",
        "results": [
            {
                "title": "Squid | National Geographic",
                "url": "https://www.nationalgeographic.com/animals/invertebrates/squid",
                "description": "Squid have <strong>eight arms</strong> and two tentacles.",
                "language": "en",
                "family_friendly": True,
            },
            {"title": "Second", "url": "https://example.org/2", "description": "two"},
        ],
    },
}


class SearchServer:
    """Answers like SearXNG and Brave; records each request's path, query and headers."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []
        self.status = 200
        self.body: bytes | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                server.requests.append((parts.path, query, dict(self.headers.items())))
                if server.body is not None:
                    body = server.body
                elif parts.path == "/search" and query.get("format") == ["json"]:
                    body = json.dumps(SEARXNG_ANSWER).encode()
                elif (
                    parts.path == "/res/v1/web/search"
                    and self.headers.get("X-Subscription-Token") == "brave-secret-123"
                ):
                    body = json.dumps(BRAVE_ANSWER).encode()
                else:
                    self.send_response(403)
                    self.end_headers()
                    return
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> SearchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


@pytest.fixture
def server() -> Iterator[SearchServer]:
    with SearchServer() as running:
        yield running


async def test_searxng_results_on_a_loopback_instance(server: SearchServer) -> None:
    settings = WebSearchSettings(enabled=True, backend="searxng", url=server.url, max_results=3)
    tool = build_web_search(settings)
    try:
        result = await tool.execute({"query": "squid facts", "count": 10})
    finally:
        await tool.aclose()
    path, query, _ = server.requests[0]
    assert (path, query["q"], query["format"]) == ("/search", ["squid facts"], ["json"])
    lines = result.content.splitlines()
    assert lines[0].startswith("UNTRUSTED_WEB_CONTENT")
    assert lines[1:4] == [
        "1. Squid - Wikipedia",
        "   https://en.wikipedia.org/wiki/Squid",
        "   Squids are cephalopods in the superorder Decapodiformes.",
    ]
    assert "javascript:" not in result.content and "dropped" not in result.content
    assert "2. Giant squid\n" in result.content  # NUL dropped, snippet capped
    assert max(len(line) for line in lines) <= 410
    assert "3. Third" in result.content and "4." not in result.content


async def test_surrogates_and_controls_in_results_reach_the_model_as_valid_text(
    server: SearchServer,
) -> None:
    # JSON escapes of a lone surrogate, NUL, ESC and a C1 control, as a hostile page title
    # or a broken backend may send them.
    hit = {
        "url": "https://example.org/odd\u0000\u001b",
        "title": "Odd \ud800 ti\u0000tle\u001b[2J",
        "content": "snip\udcff\u0085pet \ud83d\ude00",
    }
    server.body = json.dumps({"results": [hit]}).encode()
    settings = WebSearchSettings(enabled=True, backend="searxng", url=server.url)
    tool = build_web_search(settings)
    try:
        result = await tool.execute({"query": "odd"})
    finally:
        await tool.aclose()
    result.content.encode("utf-8")
    assert "1. Odd \ufffd title[2J\n   https://example.org/odd\n   snipÿpet \U0001f600" in (
        result.content
    )


async def test_brave_results_with_the_subscription_token(server: SearchServer) -> None:
    settings = WebSearchSettings(
        enabled=True, backend="brave", url=server.url, api_key="brave-secret-123"
    )
    tool = build_web_search(settings)
    try:
        with capture_logs() as logs:
            result = await tool.execute({"query": "squid facts", "count": 2})
    finally:
        await tool.aclose()
    path, query, headers = server.requests[0]
    assert (path, query["q"], query["count"]) == ("/res/v1/web/search", ["squid facts"], ["2"])
    assert headers["X-Subscription-Token"] == "brave-secret-123"
    assert "1. Squid | National Geographic" in result.content
    assert "eight arms" in result.content and "2. Second" in result.content
    assert "brave-secret-123" not in repr(logs)


async def test_backend_failures_are_tool_errors_not_crashes(server: SearchServer) -> None:
    tool = build_web_search(WebSearchSettings(enabled=True, backend="searxng", url=server.url))
    try:
        server.status = 500
        with pytest.raises(ToolError, match="HTTP 500"):
            await tool.execute({"query": "x"})
        server.status, server.body = 200, b"<html>not json</html>"
        with pytest.raises(ToolError, match="did not answer with JSON"):
            await tool.execute({"query": "x"})
        server.body = json.dumps({"results": "nope"}).encode()
        with pytest.raises(ToolError, match="unexpected format"):
            await tool.execute({"query": "x"})
        server.body = json.dumps({"results": []}).encode()
        assert (await tool.execute({"query": "x"})).content == "No results for: x"
    finally:
        await tool.aclose()
    closed = build_web_search(
        WebSearchSettings(enabled=True, backend="brave", url="http://127.0.0.1:9", api_key="k")
    )
    try:
        with pytest.raises(ToolError, match="could not be reached"):
            await closed.execute({"query": "x"})
    finally:
        await closed.aclose()


async def test_ddgs_without_the_package_says_how_to_install_it() -> None:
    try:
        import ddgs  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("ddgs is installed here; it reaches the public engines only")
    tool = build_web_search(WebSearchSettings(enabled=True, backend="ddgs"))
    with pytest.raises(ToolError, match="pip install ddgs"):
        await tool.execute({"query": "x"})


def test_config_check_names_the_web_search_key(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml", {"tools.web_search": {"enabled": True, "backend": "bing"}}
    )
    result = config_check(config)
    assert result.returncode == 2
    assert "tools.web_search.backend" in result.stdout + result.stderr
    key = tmp_path / "brave_key"
    key.write_text("from-a-file\n")
    brave = {"enabled": True, "backend": "brave", "api_key_file": key}
    write_config(config, {"tools.web_search": brave})
    result = config_check(config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "web_search" in result.stdout
