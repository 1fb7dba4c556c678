"""Errors name what went wrong on the way to the model, in words: the host name not found,
the port refused, TLS spoken to a plain-HTTP server, a server that takes the connection and
never answers the handshake, each through the adapter's own probe (llm/probe.py) against a
loopback server."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from squidd.config.sections import LLMSettings
from squidd.errors import LLMUnavailableError
from squidd.llm.probe import one_token

pytestmark = pytest.mark.anyio


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def plain_server() -> Iterator[int]:
    """A plain-HTTP server on loopback (it answers a TLS hello with a 400 in plain text)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Takes connections and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


async def _reason(base_url: str, **settings: float) -> str:
    with pytest.raises(LLMUnavailableError) as caught:
        await one_token(LLMSettings(base_url=base_url, api_key="sk-test-causes", **settings))
    return str(caught.value)


def test_the_connect_and_handshake_timeout_is_at_most_5_s() -> None:
    assert LLMSettings().connect_timeout_s <= 5.0


async def test_https_to_a_plain_server_is_named(plain_server: int) -> None:
    reason = await _reason(f"https://127.0.0.1:{plain_server}/v1")
    assert "TLS spoken to a plain-HTTP server" in reason
    assert "use http://" in reason


async def test_https_to_a_server_that_never_answers_the_handshake(silent_server: int) -> None:
    reason = await _reason(f"https://127.0.0.1:{silent_server}/v1", connect_timeout_s=0.5)
    assert "gave no TLS answer within 0.5 s" in reason


async def test_a_refused_port_and_an_unknown_name_are_told_apart() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    refused = await _reason(f"http://127.0.0.1:{port}/v1")
    assert f"connection refused by 127.0.0.1:{port}" in refused
    unknown = await _reason("http://no-such-host.invalid/v1")
    assert "host name not found: no-such-host.invalid" in unknown


async def test_a_read_timeout_names_its_length(silent_server: int) -> None:
    reason = await _reason(f"http://127.0.0.1:{silent_server}/v1", timeout_s=0.5)
    assert "sent no answer within 0.5 s" in reason
