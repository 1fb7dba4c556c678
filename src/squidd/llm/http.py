"""The HTTP clients of the model endpoints (chat, models, embeddings, speech,
transcription) and the checks that try them: one TLS context for all of them, and
connections that keep their socket (llm/backend.py).

Building a verifying TLS context reads the system's CA bundle (30-120 ms of CPU, more with
`SSL_CERT_FILE` naming a full bundle), and an `httpx2.AsyncClient` builds one of its own
unless it is given one: a start with a model check, embeddings, speech and transcription
built four, and each endpoint of a chain one more at its first request. They are all the
same context (the system's CAs, or `SSL_CERT_FILE`/`SSL_CERT_DIR` as httpx2 reads them, and
the same HTTP/1.1 ALPN), so the process builds it once, at the first client, and each
client keeps its own connection pool as before. Clients with settings of their own (the
web tools, which do not trust the environment's proxies or CA overrides) build their own.
"""

from __future__ import annotations

import functools
import ssl
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2

__all__ = ["OWN_TLS", "async_client", "tls_context"]


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verifying TLS context the model endpoints' clients share, built at first use
    exactly as an `httpx2.AsyncClient` with default settings builds its own."""
    import httpx2

    return httpx2.create_ssl_context()


OWN_TLS = frozenset({"verify", "cert", "trust_env", "http2"})
"""Options that make a client's TLS context its own: a client given any of them builds
one (httpx2 would load a certificate into, read other CAs for, or set another ALPN on the
shared one, changing it for every client)."""


def async_client(**options: Any) -> httpx2.AsyncClient:
    """An `httpx2.AsyncClient` with `options`, verifying TLS with the shared context (its
    own with any of `OWN_TLS`), its pools (the direct one and any proxy's the environment
    names) connecting through `KeptSocketBackend`."""
    import httpx2

    if options.keys() & OWN_TLS:
        client = httpx2.AsyncClient(**options)
    else:
        client = httpx2.AsyncClient(verify=tls_context(), **options)
    # private attributes of httpx2: _connect_through_kept_sockets says why
    for transport in (client._transport, *client._mounts.values()):
        _connect_through_kept_sockets(transport)
    return client


def _connect_through_kept_sockets(transport: object) -> None:
    """The backend set on the transport's connection pool before its first connection.
    httpx2 builds the pool itself and offers no way to name its backend (httpcore2's pools
    take one: `network_backend`); the pool keeps it as `_network_backend` and hands it to
    each connection it creates (tests/llm/test_http.py holds that the backend is used, so
    a new httpx2 that moves it fails there, not silently)."""
    from squidd.llm.backend import KeptSocketBackend

    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = KeptSocketBackend()
