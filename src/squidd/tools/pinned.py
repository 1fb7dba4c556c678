"""The network backend of `web_fetch` (tools/web_fetch.py): every connection of a pool goes
to the one address the tool checked, whatever host the URL names, so a second DNS answer
(rebinding) never reaches a socket. A module of its own because it subclasses httpcore2's
backend: web_fetch imports it, and httpcore2, at its first fetch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
import httpcore2

__all__ = ["PinnedBackend"]


class PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects every request of its pool to one address, whatever host the URL names."""

    def __init__(self, address: str) -> None:
        self._address = address
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return await self._inner.connect_tcp(
            self._address,
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)
