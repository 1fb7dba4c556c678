"""The dashboard's door, shared by every page module: who is logged in, the login form,
and the check every POST passes (a form body of bounded size, the session's CSRF token).

A page module gets one `Gate` in its constructor and asks it `login(request)` (None: show
the login form) or `checked(request)` (the session and form of a POST whose token is
right, 403 otherwise).
"""

from __future__ import annotations

import structlog
from aiohttp import web

from squidd.web.auth import LOGIN_COOKIE, SESSION_COOKIE, Login, Logins, new_token, same
from squidd.web.render import HEADERS, render

log = structlog.get_logger()

MAX_FORM_BYTES = 64 * 1024


async def form_of(request: web.Request) -> dict[str, str]:
    if request.content_type != "application/x-www-form-urlencoded":
        raise web.HTTPUnsupportedMediaType()
    if (request.content_length or 0) > MAX_FORM_BYTES:
        raise web.HTTPRequestEntityTooLarge(MAX_FORM_BYTES, request.content_length or 0)
    data = await request.post()
    return {k: v for k, v in data.items() if isinstance(v, str)}


def back(to: str = "/") -> web.Response:
    return web.Response(status=303, headers={**HEADERS, "Location": to})


class Gate:
    def __init__(self, logins: Logins) -> None:
        self.logins = logins

    def login(self, request: web.Request) -> Login | None:
        return self.logins.get(request.cookies.get(SESSION_COOKIE))

    async def checked(self, request: web.Request) -> tuple[Login, dict[str, str]]:
        """The session and form of a POST whose CSRF token is right; 403 otherwise."""
        login = self.login(request)
        form = await form_of(request)
        if login is None or not same(form.get("csrf"), login.csrf):
            log.info("dashboard_post_refused", path=request.path)
            raise web.HTTPForbidden(text="refused: no session or a wrong CSRF token")
        return login, form

    @staticmethod
    def login_page(note: str = "") -> web.Response:
        token = new_token()
        response = render("login.html", title="squidd: log in", note=note, token=token)
        response.set_cookie(
            LOGIN_COOKIE, token, httponly=True, samesite="Strict", path="/login", max_age=3600
        )
        return response
