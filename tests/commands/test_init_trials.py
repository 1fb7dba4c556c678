"""The set-up's trials that can be shown without a homeserver: a URL's form, and the server
name read from a homeserver that signs with it (`/_matrix/key/v2/server`) or not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from squidd.ops.doctor.trials import Refused, http_url_problem, matrix_server_name, matrix_versions

pytestmark = pytest.mark.anyio


def test_a_url_without_a_scheme_is_named() -> None:
    problem = http_url_problem("127.0.0.1:8008")
    assert problem is not None and "no http:// or https://" in problem
    assert http_url_problem("http://127.0.0.1:8008") is None
    assert http_url_problem("https://") is not None


async def _server(with_key: bool) -> TestServer:
    async def key(request: web.Request) -> web.Response:
        return web.json_response({"server_name": "example.test", "verify_keys": {}})

    async def versions(request: web.Request) -> web.Response:
        return web.json_response({"versions": ["v1.11"]})

    app = web.Application()
    app.router.add_get("/_matrix/client/versions", versions)
    if with_key:
        app.router.add_get("/_matrix/key/v2/server", key)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


@pytest.fixture(params=[True, False], ids=["signs", "client-only"])
async def homeserver(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, bool]]:
    server = await _server(request.param)
    try:
        yield str(server.make_url("")).rstrip("/"), request.param
    finally:
        await server.close()


async def test_the_server_name_is_read_when_the_server_says_it(
    homeserver: tuple[str, bool],
) -> None:
    url, signs = homeserver
    await matrix_versions(url)
    assert await matrix_server_name(url) == ("example.test" if signs else None)


async def test_a_server_that_is_no_homeserver_is_named() -> None:
    app = web.Application()
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        with pytest.raises(Refused) as caught:
            await matrix_versions(str(server.make_url("")))
    finally:
        await server.close()
    assert "is no Matrix homeserver (HTTP 404" in str(caught.value)
