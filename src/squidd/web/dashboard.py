"""The dashboard's routes, logins and forms, on aiohttp (the API channel's server).

`/` is the login form until an API key was given, then the overview (web/overview.py:
channels, turns, usage and caps, approvals, cron jobs, parked messages); `/memory` shows
MEMORY.md, `/sessions` the conversations, `/audit` the audit log. Pages are Jinja2
templates (web/render.py, escaped by default); everything comes from the `DashboardHost`
(web/host.py), never from the daemon's objects. Every response carries a strict
Content-Security-Policy and no-store; every POST needs the session's CSRF token; nothing is
read from a query string (the listener refuses one) and Host/Origin are checked by the
listener for every request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web

from squidd.channels.api.server import CHANNEL
from squidd.core.approvals import Choice
from squidd.core.cron import NoSuchJob
from squidd.core.cron_service import CronJobs
from squidd.errors import StorageError
from squidd.web.audit_page import audit_status
from squidd.web.auth import LOGIN_COOKIE, SESSION_COOKIE, Logins, same
from squidd.web.chat import ChatPages
from squidd.web.chores import ChorePages, Doctor
from squidd.web.conversations import ConversationPages
from squidd.web.gate import Gate, back, form_of
from squidd.web.host import DashboardHost
from squidd.web.overview import overview
from squidd.web.render import render, static, static_file, words
from squidd.web.timing_days import TimingDays
from squidd.web.usage_days import UsageDays

log = structlog.get_logger()

STATIC = {"style.css": "text/css", "chat.js": "text/javascript"}

CronChange = Callable[[CronJobs, str], Awaitable[str]]
CRON_CHANGES: dict[str, CronChange] = {
    "pause": CronJobs.pause,
    "resume": CronJobs.resume,
    "run": CronJobs.run_now,
    "remove": CronJobs.remove,
}


class Dashboard:
    """The pages and forms over one `DashboardHost`; `mount` adds their routes."""

    def __init__(self, host: DashboardHost, doctor: Doctor | None = None) -> None:
        self._host = host
        self._gate = Gate(Logins())
        self._history = UsageDays(host)
        self._times = TimingDays(host)
        self._parts: list[ConversationPages | ChorePages | ChatPages] = [
            ConversationPages(host, self._gate, self._history),
            ChorePages(host, self._gate, doctor),
            ChatPages(host, self._gate),
        ]
        for name in STATIC:
            static_file(name)  # read now, before the event loop serves a page

    def mount(self, app: web.Application) -> None:
        app.router.add_get("/", self._home)
        for name, kind in STATIC.items():
            app.router.add_get(f"/{name}", self._static(name, kind))
        app.router.add_post("/login", self._login)
        app.router.add_post("/logout", self._logout)
        app.router.add_get("/memory", self._memory)
        app.router.add_post("/memory", self._memory_save)
        app.router.add_get("/audit", self._audit)
        app.router.add_post("/approvals/{id}/{choice}", self._approve)
        app.router.add_post("/cron/{name}/{change}", self._cron)
        for part in self._parts:
            part.mount(app)

    @staticmethod
    def _static(name: str, kind: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            return static(name, kind)

        return serve

    # --- login ---------------------------------------------------------------------
    async def _login(self, request: web.Request) -> web.StreamResponse:
        form = await form_of(request)
        if not same(form.get("csrf"), request.cookies.get(LOGIN_COOKIE, "\0")):
            raise web.HTTPForbidden(text="refused: the login form's CSRF token is wrong")
        key_id = request.app[CHANNEL].keys.match(form.get("key", ""))
        if key_id is None:
            log.info("dashboard_login_refused")
            return self._gate.login_page("That key is not one of the API keys.")
        token, _ = self._gate.logins.start(key_id)
        response = back()
        response.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="Strict", path="/")
        response.del_cookie(LOGIN_COOKIE, path="/login")
        log.info("dashboard_login")
        return response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        await self._gate.checked(request)
        self._gate.logins.end(request.cookies.get(SESSION_COOKIE))
        response = back()
        response.del_cookie(SESSION_COOKIE, path="/")
        return response

    async def _home(self, request: web.Request) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        values = await overview(self._host, await self._host.snapshot(), self._history, self._times)
        return render("overview.html", title="squidd", here="overview", csrf=login.csrf, **values)

    async def _memory(self, request: web.Request) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        text = await self._host.memory()
        return render(
            "memory.html",
            title="MEMORY.md",
            here="memory",
            csrf=login.csrf,
            text=text,
            confirming=False,
        )

    async def _memory_save(self, request: web.Request) -> web.StreamResponse:
        login, form = await self._gate.checked(request)
        text = form.get("text", "").replace("\r\n", "\n")
        if form.get("confirm") != "yes":
            # First the confirmation: the new text as it will be saved, and one more click.
            return render(
                "memory.html",
                title="MEMORY.md: confirm",
                here="memory",
                csrf=login.csrf,
                text=text,
                confirming=True,
            )
        await self._host.save_memory(text)
        log.info("dashboard_memory_saved", chars=len(text))
        return back("/memory")

    async def _audit(self, request: web.Request) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        status, newest = await audit_status(self._host.data_dir)
        keys = ("time", "session", "tool", "decision", "by")
        rows = [{key: words(r.get(key, "")) for key in keys} for r in newest]
        return render(
            "audit.html",
            title="Audit log",
            here="audit",
            csrf=login.csrf,
            chain=status,
            rows=rows,
        )

    # --- forms ------------------------------------------------------------------------
    async def _approve(self, request: web.Request) -> web.StreamResponse:
        await self._gate.checked(request)
        choices = {"yes": Choice.ONCE, "no": Choice.NO}
        choice = choices.get(request.match_info["choice"])
        if choice is None:
            raise web.HTTPNotFound()
        said = await self._host.answer_approval(request.match_info["id"], choice)
        if said is None:
            raise web.HTTPNotFound()
        log.info("dashboard_approval", outcome=said)
        return back()

    async def _cron(self, request: web.Request) -> web.StreamResponse:
        """Pause, resume, run now or remove a job, through the cron service; when it
        refuses, its words on a page (404 for a job that is not there)."""
        login, _ = await self._gate.checked(request)
        name, change = request.match_info["name"], request.match_info["change"]
        act = CRON_CHANGES.get(change)
        if act is None:
            raise web.HTTPNotFound()
        try:
            said = await act(self._host.cron, name)
        except (ValueError, StorageError) as exc:
            log.info("dashboard_cron_refused", job=name, change=change, reason=str(exc))
            return render(
                "message.html",
                status=404 if isinstance(exc, NoSuchJob) else 409,
                title="Cron job",
                csrf=login.csrf,
                here="",
                back="/",
                message=str(exc),
            )
        log.info("dashboard_cron", job=name, change=change, said=said)
        return back()
