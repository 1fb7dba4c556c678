"""What went wrong on the way to the model endpoint, in words: the name not found, the port
refused, TLS spoken to a plain-HTTP server (and plain HTTP to a TLS one), a certificate not
trusted, a timeout with its length. The error table (errors.py) words its connection and
timeout errors with `describe`; the status line of `squidd status`, `doctor` and the
dashboard show those words.

The library's exception (openai's, wrapping httpx2's, wrapping the socket's or ssl's) is
read down its chain of causes; the request it carries says which URL was tried and with
which timeouts.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

import httpx2

__all__ = ["describe", "is_timeout"]

# What OpenSSL says when the bytes that came back are not TLS (a plain-HTTP answer).
_NOT_TLS = (
    "wrong_version_number",
    "wrong version number",
    "record layer failure",
    "packet length too long",
    "http_request",
    "unknown protocol",
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _request(exc: BaseException) -> httpx2.Request | None:
    for link in _chain(exc):
        request = getattr(link, "_request", None) or getattr(link, "request", None)
        if isinstance(request, httpx2.Request):
            return request
    return None


def _where(request: httpx2.Request | None) -> tuple[str, str]:
    """(scheme, host:port) of the request, ("", "the endpoint") without one."""
    if request is None:
        return "", "the endpoint"
    url = request.url
    port = f":{url.port}" if url.port else ""
    return url.scheme, f"{url.host}{port}"


def _timeouts(request: httpx2.Request | None) -> dict[str, float]:
    raw = request.extensions.get("timeout", {}) if request is not None else {}
    return {k: float(v) for k, v in raw.items() if isinstance(v, int | float)}


def is_timeout(exc: BaseException) -> bool:
    return any(isinstance(link, httpx2.TimeoutException | TimeoutError) for link in _chain(exc))


def describe(exc: BaseException) -> str:
    """The reason in words, naming the host (never the key, never the path's query)."""
    request = _request(exc)
    scheme, host = _where(request)
    links = list(_chain(exc))
    if is_timeout(exc):
        return _timeout(links, scheme, host, _timeouts(request))
    for link in links:
        if isinstance(link, socket.gaierror):
            return f"host name not found: {host.rsplit(':', 1)[0]} (check llm.base_url)"
        if isinstance(link, ConnectionRefusedError):
            return f"connection refused by {host}: nothing listens on that port"
        if isinstance(link, ssl.SSLCertVerificationError):
            return f"the TLS certificate of {host} is not trusted ({link.verify_message})"
        if isinstance(link, ssl.SSLError) and any(s in str(link).lower() for s in _NOT_TLS):
            return (
                f"TLS spoken to a plain-HTTP server: {host} answered https:// in plain HTTP "
                "(use http:// in llm.base_url)"
            )
    for link in links:
        if scheme == "http" and isinstance(
            link, httpx2.RemoteProtocolError | httpx2.ReadError | ConnectionResetError
        ):
            return (
                f"plain HTTP spoken to a TLS server? {host} closed the connection without an "
                "HTTP answer (try https:// in llm.base_url)"
            )
    for link in links:
        if isinstance(link, OSError) and link.strerror:
            return f"connection failed ({host}: {link.strerror})"
    return f"connection failed ({host}: {type(links[-1]).__name__})"


def _timeout(links: list[BaseException], scheme: str, host: str, limits: dict[str, float]) -> str:
    handshake = any(isinstance(link, ssl.SSLWantReadError) for link in links)
    connecting = any(isinstance(link, httpx2.ConnectTimeout) for link in links)
    if connecting:
        limit = limits.get("connect")
        within = f" within {limit:g} s" if limit else ""
        if handshake and scheme == "https":
            return (
                f"TLS spoken to a plain-HTTP server? {host} took the connection but gave no TLS "
                f"answer{within} (use http:// in llm.base_url if it speaks plain HTTP)"
            )
        return f"timeout: no connection to {host}{within}"
    limit = limits.get("read")
    within = f" within {limit:g} s" if limit else ""
    return f"timeout: {host} sent no answer{within}"
