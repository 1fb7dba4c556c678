"""The network backend of the model endpoints' clients (llm/http.py): httpcore2's own AnyIO
backend, with each connection's socket found once instead of at every look.

Each time a request starts or ends, httpcore2's pool asks every idle connection whether it
has expired: the keep-alive time, and whether the server closed it (its socket readable
while idle). To find the socket it asks the connection's AnyIO stream, whose typed
attributes are built anew, a dict of a dozen getters, at each ask. Under fifty turns at once
that was about 0.9 ms of CPU per turn (a seventh of P3's figure, `bench/profile_p3.py`:
`has_expired`, `get_extra_info`, `extra_attributes`), for a socket that never changes.
The streams here keep their socket from the connection's start (the TLS stream's is the
same socket), registered with a poller of their own, and answer the pool's question with
the same readiness check; everything else
goes to httpcore2's stream unchanged. A module of its own because it subclasses httpcore2's
interfaces: it is imported, with httpcore2, by the first client.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore2

__all__ = ["KeptSocketBackend", "readable"]


def readable(sock: socket.socket | None, poller: select.poll | None = None) -> bool:
    """Whether the socket has something to read now (or is gone): for an idle HTTP/1.1
    connection that means the server closed it. The test httpcore2's own stream makes;
    `poller`, when given, already has the socket registered."""
    if sock is None or sock.fileno() < 0:
        return True
    if poller is None:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class KeptSocketStream(httpcore2.AsyncNetworkStream):
    """httpcore2's stream with its socket kept from the start."""

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")
        # registered once; a closed socket (fileno -1) is caught before it is polled, so a
        # number the system gave to another file meanwhile is never asked about
        self._poller = select.poll()
        if self._socket is not None and self._socket.fileno() >= 0:
            self._poller.register(self._socket, select.POLLIN)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109 - httpcore's stream interface
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109 - httpcore's stream interface
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's stream interface
    ) -> httpcore2.AsyncNetworkStream:
        return KeptSocketStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return readable(self._socket, self._poller)
        if info == "socket":
            return self._socket
        return self._inner.get_extra_info(info)


class KeptSocketBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's AnyIO backend, its streams wrapped in `KeptSocketStream`."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return KeptSocketStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return KeptSocketStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
