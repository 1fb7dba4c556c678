"""The API channel's HTTP side (aiohttp's server): checks every request passes, then the
two OpenAI routes.

Every request, in order: no query string at all (a key there would end up in logs and
browser history: 400, never read); `Host` and, when sent, `Origin` name the listen address,
`localhost` or a configured name (a DNS-rebinding page names its own: 403); then for
`/v1/` a bearer key from the keys file (401 otherwise), the key's rate limit (429 with
Retry-After), a JSON content type (415) and a body of at most `max_body_bytes` (413).
Errors have the OpenAI shape; a browser asking for a page (Accept: text/html, outside
`/v1/`) gets the refusal as a page naming the fix (`api.allowed_hosts`, the address).
aiohttp's server is used because it is already locked (it comes with
matrix-nio), runs on the asyncio loop the daemon's anyio runs on, and bounds request bodies
itself.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from typing import Protocol
from urllib.parse import urlsplit

import anyio
import structlog
from aiohttp import web

from squidd.channels.api import wire
from squidd.channels.api.keys import ApiKeys
from squidd.channels.api.limits import RateLimit
from squidd.channels.api.requests import Pending, StoredAnswer
from squidd.channels.api.wire import BadRequest
from squidd.config.api import ApiSettings

log = structlog.get_logger()

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Service(Protocol):
    """What the routes ask of the API channel (channel.py's `Service`)."""

    @property
    def settings(self) -> ApiSettings: ...

    @property
    def keys(self) -> ApiKeys: ...

    @property
    def rate(self) -> RateLimit: ...

    @property
    def pages(self) -> Callable[[web.Application], None] | None: ...

    @property
    def agents(self) -> tuple[str, ...]: ...

    async def submit(
        self,
        key_id: str,
        conversation: str,
        text: str,
        idempotency_key: str,
        *,
        drafts: bool = False,
        model: str = "",
    ) -> Pending | StoredAnswer: ...


CHANNEL: web.AppKey[Service] = web.AppKey("channel")
KEY_ID: web.RequestKey[str] = web.RequestKey("key_id", str)
_STATUS_KIND = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}


def _error(
    status: int, message: str, code: str, headers: dict[str, str] | None = None
) -> web.Response:
    kind = _STATUS_KIND.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return web.json_response(
        wire.error(message, kind=kind, code=code), status=status, headers=headers
    )


def _hostname(value: str) -> str:
    return (urlsplit(f"//{value}").hostname or "").lower()


def allowed_host(channel: Service, value: str) -> bool:
    names = {"localhost", "127.0.0.1", "::1", channel.settings.host.lower()}
    names.update(name.lower() for name in channel.settings.allowed_hosts)
    return _hostname(value) in names


def _admit(channel: Service, request: web.Request) -> None:
    """The checks every request passes before its route (see the module docstring)."""
    if request.query_string:
        raise BadRequest(
            "query parameters are not accepted; send the key as Authorization: Bearer",
            code="query_not_accepted",
        )
    origin = request.headers.get("Origin")
    if not allowed_host(channel, request.host) or (
        origin is not None and not allowed_host(channel, urlsplit(origin).netloc)
    ):
        raise BadRequest("this Host or Origin is not served here", status=403, code="bad_host")
    if request.path.startswith("/v1/"):
        _authenticate(channel, request)


@web.middleware
async def _checks(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        _admit(request.app[CHANNEL], request)
        return await handler(request)
    except BadRequest as exc:
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
        if _for_a_person(request):
            return refusal_page(request.app[CHANNEL].settings, request, exc, headers)
        return _error(exc.status, str(exc), exc.code, headers)
    except web.HTTPException as exc:
        if exc.status >= 400:
            return _error(exc.status, exc.reason, exc.reason.lower().replace(" ", "_"))
        raise
    except Exception as exc:
        log.exception("api_request_failed", path=request.path, error=type(exc).__name__)
        return _error(500, "the request failed inside squidd", "internal_error")


def _for_a_person(request: web.Request) -> bool:
    """A browser asking for a page (Accept: text/html), not an API client under /v1/."""
    return not request.path.startswith("/v1/") and "text/html" in request.headers.get("Accept", "")


_FIXES = {
    "query_not_accepted": "Open the address without the part after '?': the dashboard reads "
    "nothing from a query string (a key there would end up in logs and browser history).",
    "bad_host": "Open the dashboard at {home}, or add the name you used ({host}) to "
    "api.allowed_hosts in the config (and restart squidd) to serve it under that name too.",
}


def refusal_page(
    settings: ApiSettings,
    request: web.Request,
    exc: BadRequest,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """A refusal a person can read: what was refused and the setting or step that fixes it."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    port = sockname[1] if isinstance(sockname, tuple) else settings.port
    home = f"http://127.0.0.1:{port}/"
    fix = _FIXES.get(exc.code, "").format(home=home, host=_hostname(request.host) or "?")
    body = (
        "<!doctype html><html><head><meta charset='utf-8'><title>squidd: refused</title>"
        f"</head><body><h1>squidd refused this request</h1><p>{html.escape(str(exc))}</p>"
        f"<p>{html.escape(fix)}</p></body></html>"
    )
    return web.Response(text=body, status=exc.status, content_type="text/html", headers=headers)


def _authenticate(channel: Service, request: web.Request) -> None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    kid = channel.keys.match(token.strip()) if scheme.lower() == "bearer" else None
    if kid is None:
        raise BadRequest(
            "a valid API key is needed (Authorization: Bearer)", status=401, code="invalid_api_key"
        )
    wait = channel.rate.take(kid)
    if wait:
        raise BadRequest("rate limit reached", status=429, code="rate_limited", retry_after=wait)
    request[KEY_ID] = kid


async def _models(request: web.Request) -> web.Response:
    channel = request.app[CHANNEL]
    return web.json_response(wire.models(channel.settings.model, channel.agents))


async def _body(channel: Service, request: web.Request) -> bytes:
    if request.content_type != "application/json":
        raise BadRequest(
            "send the body as application/json", status=415, code="unsupported_media_type"
        )
    limit = channel.settings.max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise BadRequest(f"the body is over {limit} bytes", status=413, code="body_too_large")
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BadRequest(
            f"the body is over {limit} bytes", status=413, code="body_too_large"
        ) from None


async def _chat(request: web.Request) -> web.StreamResponse:
    channel = request.app[CHANNEL]
    chat = wire.parse_chat(await _body(channel, request))
    kid = request[KEY_ID]
    named = request.headers.get("X-Squidd-Conversation", "") or chat.user
    conversation = wire.valid_conversation(named) if named else f"key-{kid}"
    idempotency_key = request.headers.get("Idempotency-Key", "")
    if idempotency_key and not wire.IDEMPOTENCY_KEY.match(idempotency_key):
        raise BadRequest(
            "Idempotency-Key must be 1-200 printable characters", code="invalid_idempotency_key"
        )
    try:
        answer = await channel.submit(
            kid, conversation, chat.text, idempotency_key, model=chat.model
        )
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError):
        raise BadRequest("the daemon is stopping", status=503, code="unavailable") from None
    if chat.stream:
        return await _stream(request, channel, answer)
    if isinstance(answer, Pending):
        await answer.done.wait()
    return web.json_response(
        wire.completion(answer.completion_id, answer.model, answer.text, answer.created)
    )


async def _wait(response: web.StreamResponse, event: anyio.Event, keepalive_s: float) -> None:
    while not event.is_set():
        with anyio.move_on_after(keepalive_s):
            await event.wait()
        if not event.is_set():
            await response.write(wire.KEEPALIVE)


async def _parts(response: web.StreamResponse, answer: Pending, keepalive_s: float) -> None:
    """Each message of the request as it comes (an approval question, then the reply),
    until the request is acknowledged."""
    written = 0
    cid, model, created = answer.completion_id, answer.model, answer.created
    while True:
        changed = answer.changed
        while written < len(answer.parts):
            text = ("\n\n" if written else "") + answer.parts[written]
            await response.write(wire.chunk(cid, model, created, {"content": text}, None))
            written += 1
        if answer.done.is_set():
            return
        await _wait(response, changed, keepalive_s)


async def _stream(
    request: web.Request, channel: Service, answer: Pending | StoredAnswer
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    cid, model, created = answer.completion_id, answer.model, answer.created
    keepalive = channel.settings.keepalive_s
    try:
        await response.write(wire.chunk(cid, model, created, {"role": "assistant"}, None))
        if isinstance(answer, Pending):
            await _parts(response, answer, keepalive)
        elif answer.text:
            await response.write(wire.chunk(cid, model, created, {"content": answer.text}, None))
        await response.write(wire.chunk(cid, model, created, {}, "stop"))
        await response.write(wire.DONE)
        await response.write_eof()
    except ConnectionError:
        # The client went away: the turn goes on in the router and its reply is stored.
        log.info("api_client_gone", completion=cid)
    return response


def build_app(channel: Service) -> web.Application:
    app = web.Application(middlewares=[_checks], client_max_size=channel.settings.max_body_bytes)
    app[CHANNEL] = channel
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/v1/chat/completions", _chat)
    if channel.pages is not None:
        channel.pages(app)
    return app
