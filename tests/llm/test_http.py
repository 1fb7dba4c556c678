"""The model endpoints' HTTP clients (llm/http.py): one verifying TLS context for all, and
connections that keep their socket (llm/backend.py)."""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.abc
import httpx2
import httpx2._transports.default as httpx2_transport
import pytest

from squidd.config.media import TranscriptionSettings
from squidd.config.speech import SpeechSettings
from squidd.llm import http
from squidd.llm.backend import KeptSocketStream, readable
from squidd.llm.embeddings import EmbeddingsClient
from squidd.llm.speech import SpeechClient
from squidd.llm.transcription import WhisperTranscriber

pytestmark = pytest.mark.anyio


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ssl.SSLContext]]:
    """The contexts httpx2 builds from here on (the shared one forgotten first)."""
    contexts: list[ssl.SSLContext] = []
    real = httpx2.create_ssl_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = real(*args, **kwargs)
        contexts.append(context)
        return context

    http.tls_context.cache_clear()
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        for name in (proxy, proxy.lower()):  # a proxy's transport builds a context too
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(httpx2, "create_ssl_context", counting)
    # what a client's transport calls (it imported the function itself)
    monkeypatch.setattr(httpx2_transport, "create_ssl_context", counting)
    yield contexts
    http.tls_context.cache_clear()


async def test_clients_share_one_verifying_context(built: list[ssl.SSLContext]) -> None:
    clients = [
        http.async_client(timeout=5),
        EmbeddingsClient("https://example.invalid/v1", "m", None, timeout_s=5)._client,
        SpeechClient(SpeechSettings(base_url="https://example.invalid/v1"), max_bytes=10)._client,
        WhisperTranscriber(TranscriptionSettings(base_url="https://example.invalid/v1"))._client,
    ]
    try:
        # one built by the shared context's first use; each client given it as it is
        assert len(built) == 1 + len(clients)
        assert all(context is built[0] for context in built)
        shared = built[0]
        assert shared.verify_mode is ssl.CERT_REQUIRED
        assert shared.check_hostname
        assert shared.cert_store_stats() == httpx2.create_ssl_context().cert_store_stats()
    finally:
        for client in clients:
            await client.aclose()


async def test_a_client_with_tls_options_of_its_own_builds_its_own_context(
    built: list[ssl.SSLContext],
) -> None:
    own = httpx2.AsyncClient(trust_env=False)
    shared = http.async_client()
    also_own = http.async_client(trust_env=False)
    try:
        assert len(built) == 4
        assert built[0] is not built[1]
        assert built[1] is built[2]  # the shared one, then given to the client as it is
        assert built[3] not in built[:3]
    finally:
        for client in (own, shared, also_own):
            await client.aclose()


async def test_an_idle_connection_the_server_closed_is_not_used_again() -> None:
    """The pool asks an idle connection whether the server closed it (its socket readable)
    before reusing it: through the kept socket, a closed one is dropped and the next request
    gets a new connection instead of a "server disconnected" error."""
    connections: list[int] = []
    closed = anyio.Event()

    async def answer_once(stream: anyio.abc.SocketStream) -> None:
        connections.append(1)
        async with stream:
            received = b""
            while b"\r\n\r\n" not in received:
                received += await stream.receive()
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        closed.set()  # the server hangs up on an idle keep-alive connection

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio's, not Django's
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer_once)
        client = http.async_client(timeout=10)
        async with client:
            first = await client.get(f"http://127.0.0.1:{port}/")
            assert isinstance(first.extensions["network_stream"], KeptSocketStream)
            await closed.wait()
            stream = first.extensions["network_stream"]
            with anyio.fail_after(10):
                # the FIN on its way over loopback; the socket is the connection's (its
                # transport reads it), so its state is polled, not awaited
                while not stream.get_extra_info("is_readable"):  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            second = await client.get(f"http://127.0.0.1:{port}/")
        tg.cancel_scope.cancel()
    assert (first.text, second.text) == ("ok", "ok")
    assert len(connections) == 2


async def test_an_idle_connection_the_server_keeps_is_used_again() -> None:
    """Keep-alive, what the kept socket is for: while the server keeps the connection open
    it is not readable, and the next request goes over it (one connection for both)."""
    connections: list[int] = []

    async def keep_answering(stream: anyio.abc.SocketStream) -> None:
        connections.append(1)
        async with stream:
            received = b""
            while True:
                while b"\r\n\r\n" not in received:
                    try:
                        received += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                _, _, received = received.partition(b"\r\n\r\n")
                await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio's, not Django's
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, keep_answering)
        async with http.async_client(timeout=10) as client:
            first = await client.get(f"http://127.0.0.1:{port}/")
            stream = first.extensions["network_stream"]
            assert isinstance(stream, KeptSocketStream)
            assert stream.get_extra_info("is_readable") is False
            second = await client.get(f"http://127.0.0.1:{port}/")
            assert second.extensions["network_stream"] is stream
        tg.cancel_scope.cancel()
    assert (first.text, second.text, len(connections)) == ("ok", "ok", 1)


def test_readable_is_what_the_socket_says() -> None:
    left, right = socket.socketpair()
    kept = select.poll()
    kept.register(left, select.POLLIN)
    with left, right:
        assert (readable(left), readable(left, kept)) == (False, False)
        right.sendall(b"x")
        assert (readable(left), readable(left, kept)) == (True, True)
    assert (readable(left), readable(left, kept)) == (True, True)  # closed
    assert readable(None)
