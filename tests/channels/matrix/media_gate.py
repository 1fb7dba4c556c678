"""A reverse proxy on 127.0.0.1 in front of Synapse that holds media downloads at a gate.

The bot talks to the homeserver through it; everything passes through unchanged, except
that a media download (`/_matrix/client/v1/media/download/...`, `/_matrix/media/v3/download/...`)
waits while the gate is closed. That makes a slow download observable and controllable
(`started`, `finished`, `release`) without any wall-clock wait: a test can check what
happened while a download was still in flight.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

import aiohttp
from aiohttp import web

from tests.servers.synapse.server import free_port

_DOWNLOAD_PREFIXES = ("/_matrix/client/v1/media/download/", "/_matrix/media/v3/download/")
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
    "host",
    "content-length",
    "content-encoding",
}


class MediaGate:
    """`async with MediaGate(upstream) as gate:` -- `gate.url` is the homeserver to use."""

    def __init__(self, upstream: str) -> None:
        self._upstream = upstream.rstrip("/")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.started = 0  # downloads that reached the gate
        self.finished = 0  # downloads whose whole body was sent
        self._open = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def close(self) -> None:
        """Hold every download that arrives from now on (and any waiting one)."""
        self._open.clear()

    def release(self) -> None:
        """Let held and later downloads through."""
        self._open.set()

    async def __aenter__(self) -> MediaGate:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._proxy)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._open.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        download = request.path.startswith(_DOWNLOAD_PREFIXES)
        if download:
            self.started += 1
            await self._open.wait()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        body = await request.read()
        async with self._session.request(
            request.method,
            self._upstream + request.path_qs,
            headers=headers,
            data=body or None,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=None),
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_BY_HOP:
                    response.headers[key] = value
            try:
                await response.prepare(request)
                async for chunk in upstream.content.iter_chunked(64 * 1024):
                    await response.write(chunk)
                await response.write_eof()
            except ConnectionResetError:  # the client went away mid-body (a stopped daemon)
                return response
        if download:
            self.finished += 1
        return response
