"""The dashboard's pages and forms, on aiohttp (the API channel's server).

`/` is the login form until an API key was given, then the overview: the channels and
their state, turns, today's usage and caps, the heartbeat and cron (all from
`Daemon.snapshot`, what `squidd status` prints), pending approvals (approve / deny), the
cron jobs (pause, resume, run now, remove: the cron service's words when one is refused),
parked messages; `/memory` shows MEMORY.md. Everything comes from the `DashboardHost`
(web/host.py), never from the daemon's objects. Every response carries a
strict Content-Security-Policy and no-store; every POST needs the session's CSRF token;
nothing is read from a query string (the listener refuses one) and Host/Origin are checked
by the listener for every request.
"""

from __future__ import annotations

import html
import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from squidd.channels.api.server import CHANNEL
from squidd.core.approvals import Choice
from squidd.core.cron import NoSuchJob
from squidd.core.cron_service import CronJobs
from squidd.errors import StorageError
from squidd.fs import safe_name
from squidd.llm.health import model_lines
from squidd.store.cron_deliveries import CronDeliveries, delivery_note
from squidd.web.audit_page import audit_status
from squidd.web.auth import LOGIN_COOKIE, SESSION_COOKIE, Login, Logins, new_token, same
from squidd.web.host import DashboardHost
from squidd.web.sessions import SessionCounts

log = structlog.get_logger()

CSP = "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make POSTs say Origin: null
    "Cache-Control": "no-store",
}
STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;"
    "text-align:left;vertical-align:top}form.inline{display:inline}"
)
MAX_FORM_BYTES = 64 * 1024


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: str) -> web.Response:
    text = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)}</title>"
        f"<link rel=stylesheet href=/style.css></head><body><h1>{esc(title)}</h1>{body}"
        "</body></html>"
    )
    return web.Response(text=text, content_type="text/html", headers=HEADERS)


def table(rows: list[list[str]], head: list[str]) -> str:
    if not rows:
        return "<p>none</p>"
    top = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{top}</tr>{body}</table>"


def _denied(jobs: list[dict[str, Any]]) -> str:
    rows = [
        [
            esc(job.get("session", "")),
            esc(", ".join(job.get("tools") or [])),
            esc(job.get("denied", 0)),
            esc(job.get("last") or ""),
            esc(job.get("fix", "")),
        ]
        for job in jobs
    ]
    return table(rows, ["job", "tools", "denied", "last", "fix"])


def plain(value: Any) -> str:
    """A nested snapshot value as escaped text."""
    if isinstance(value, dict | list):
        return f"<code>{esc(json.dumps(value, ensure_ascii=False, default=str))}</code>"
    return esc(value)


def button(action: str, csrf: str, label: str) -> str:
    return (
        f'<form class=inline method=post action="{esc(action)}">'
        f'<input type=hidden name=csrf value="{esc(csrf)}">'
        f"<button type=submit>{esc(label)}</button></form>"
    )


def memory_form(login: Login, text: str, confirming: bool) -> str:
    """MEMORY.md in a text area; saving asks once more (`confirm=yes` on the second form)."""
    confirm = "<input type=hidden name=confirm value=yes>" if confirming else ""
    label = "Yes, replace MEMORY.md" if confirming else "Save..."
    return (
        '<form method=post action="/memory">'
        f'<input type=hidden name=csrf value="{esc(login.csrf)}">{confirm}'
        f"<textarea name=text rows=30 cols=100>{esc(text)}</textarea><br>"
        f"<button type=submit>{esc(label)}</button></form>"
    )


CronChange = Callable[[CronJobs, str], Awaitable[str]]
CRON_CHANGES: dict[str, CronChange] = {
    "pause": CronJobs.pause,
    "resume": CronJobs.resume,
    "run": CronJobs.run_now,
    "remove": CronJobs.remove,
}


class Dashboard:
    """The pages and forms over one `DashboardHost`; `mount` adds their routes."""

    def __init__(self, host: DashboardHost) -> None:
        self._host = host
        self._logins = Logins()
        self._counts = SessionCounts(host.data_dir)

    def mount(self, app: web.Application) -> None:
        app.router.add_get("/", self._home)
        app.router.add_get("/style.css", self._style)
        app.router.add_post("/login", self._login)
        app.router.add_post("/logout", self._logout)
        app.router.add_get("/memory", self._memory)
        app.router.add_post("/memory", self._memory_save)
        app.router.add_get("/audit", self._audit)
        app.router.add_get("/sessions", self._sessions_page)
        app.router.add_get("/sessions/{file}", self._session_page)
        app.router.add_post("/approvals/{id}/{choice}", self._approve)
        app.router.add_post("/cron/{name}/{change}", self._cron)

    # --- sessions ---------------------------------------------------------------------
    def _session(self, request: web.Request) -> Login | None:
        return self._logins.get(request.cookies.get(SESSION_COOKIE))

    async def _form(self, request: web.Request) -> dict[str, str]:
        if request.content_type != "application/x-www-form-urlencoded":
            raise web.HTTPUnsupportedMediaType()
        if (request.content_length or 0) > MAX_FORM_BYTES:
            raise web.HTTPRequestEntityTooLarge(MAX_FORM_BYTES, request.content_length or 0)
        data = await request.post()
        return {k: v for k, v in data.items() if isinstance(v, str)}

    async def _checked(self, request: web.Request) -> Login:
        """The session of a POST whose CSRF token is right; 403 otherwise."""
        login = self._session(request)
        form = await self._form(request)
        if login is None or not same(form.get("csrf"), login.csrf):
            log.info("dashboard_post_refused", path=request.path)
            raise web.HTTPForbidden(text="refused: no session or a wrong CSRF token")
        return login

    @staticmethod
    def _back() -> web.Response:
        return web.Response(status=303, headers={**HEADERS, "Location": "/"})

    # --- pages ------------------------------------------------------------------------
    async def _style(self, request: web.Request) -> web.Response:
        return web.Response(text=STYLE, content_type="text/css", headers=HEADERS)

    def _login_page(self, note: str = "") -> web.Response:
        token = new_token()
        body = (
            (f"<p><strong>{esc(note)}</strong></p>" if note else "")
            + '<form method=post action="/login">'
            f'<input type=hidden name=csrf value="{esc(token)}">'
            "<label>API key <input type=password name=key autocomplete=off></label> "
            "<button type=submit>Log in</button></form>"
        )
        response = page("squidd: log in", body)
        response.set_cookie(
            LOGIN_COOKIE, token, httponly=True, samesite="Strict", path="/login", max_age=3600
        )
        return response

    async def _login(self, request: web.Request) -> web.StreamResponse:
        form = await self._form(request)
        if not same(form.get("csrf"), request.cookies.get(LOGIN_COOKIE, "\0")):
            raise web.HTTPForbidden(text="refused: the login form's CSRF token is wrong")
        if request.app[CHANNEL].keys.match(form.get("key", "")) is None:
            log.info("dashboard_login_refused")
            return self._login_page("That key is not one of the API keys.")
        token, _ = self._logins.start()
        response = self._back()
        response.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="Strict", path="/")
        response.del_cookie(LOGIN_COOKIE, path="/login")
        log.info("dashboard_login")
        return response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        await self._checked(request)
        self._logins.end(request.cookies.get(SESSION_COOKIE))
        response = self._back()
        response.del_cookie(SESSION_COOKIE, path="/")
        return response

    async def _home(self, request: web.Request) -> web.Response:
        login = self._session(request)
        if login is None:
            return self._login_page()
        snap = await self._host.snapshot()
        parts = [
            button("/logout", login.csrf, "Log out"),
            '<p><a href="/memory">MEMORY.md</a> | <a href="/audit">audit log</a> | '
            '<a href="/sessions">sessions</a></p>',
            "<h2>Channels</h2>",
            table(
                [
                    [esc(c.get("name", "")), esc(c.get("state", "")), plain(c.get("detail", ""))]
                    for c in snap["children"]
                ],
                ["name", "state", "detail"],
            ),
            "<h2>Model</h2>"
            + "<br>".join(esc(line) for line in model_lines(snap.get("model")) or ["unknown"]),
            "<h2>Turns</h2>" + plain(snap["turns"]),
            "<h2>Pending approvals</h2>" + await self._approvals(login),
            # Each job with its next run, read from the jobs file: right after a change made
            # here, the scheduler may not have reloaded it yet.
            "<h2>Cron jobs</h2>" + await self._jobs(login),
            "<h2>Denied in cron and heartbeat runs (no one to approve)</h2>"
            + _denied(snap.get("unattended_denied") or []),
            "<h2>Heartbeat</h2>" + plain(snap["heartbeat"] or "off"),
            "<h2>Usage today</h2>" + plain(snap["usage_today"]),
            "<h2>Caps</h2>" + plain(snap["limits"]),
            "<h2>Parked messages</h2>" + plain(snap["parked"]),
        ]
        return page("squidd", "".join(parts))

    async def _approvals(self, login: Login) -> str:
        waiting = await self._host.approvals_waiting()
        rows = [
            [
                esc(q.id),
                esc(q.session),
                esc(q.prompt()),
                button(f"/approvals/{q.id}/yes", login.csrf, "Approve")
                + button(f"/approvals/{q.id}/no", login.csrf, "Deny"),
            ]
            for q in waiting
        ]
        return table(rows, ["id", "session", "question", ""])

    async def _jobs(self, login: Login) -> str:
        jobs = await self._host.cron.jobs()
        deliveries = CronDeliveries(self._host.data_dir).read_sync()
        rows = [
            [
                esc(j.name),
                esc(j.describe()),
                esc(j.prompt[:200]),
                esc(j.next_run or ""),
                "paused" if j.paused else "active",
                esc(delivery_note(deliveries.get(j.name)) or "-"),
                button(
                    f"/cron/{j.name}/{'resume' if j.paused else 'pause'}",
                    login.csrf,
                    "Resume" if j.paused else "Pause",
                )
                + button(f"/cron/{j.name}/run", login.csrf, "Run now")
                + button(f"/cron/{j.name}/remove", login.csrf, "Remove"),
            ]
            for j in jobs
        ]
        return table(rows, ["name", "when", "prompt", "next run", "state", "last delivery", ""])

    async def _memory(self, request: web.Request) -> web.Response:
        login = self._session(request)
        if login is None:
            return self._login_page()
        text = await self._host.memory()
        return page("MEMORY.md", '<p><a href="/">back</a></p>' + memory_form(login, text, False))

    async def _memory_save(self, request: web.Request) -> web.StreamResponse:
        login = await self._checked(request)
        form = await self._form(request)
        text = form.get("text", "").replace("\r\n", "\n")
        if form.get("confirm") != "yes":
            # First the confirmation: the new text as it will be saved, and one more click.
            note = "<p><strong>Replace MEMORY.md with this text?</strong></p>"
            return page("MEMORY.md: confirm", note + memory_form(login, text, True))
        await self._host.save_memory(text)
        log.info("dashboard_memory_saved", chars=len(text))
        return web.Response(status=303, headers={**HEADERS, "Location": "/memory"})

    async def _sessions_page(self, request: web.Request) -> web.Response:
        if self._session(request) is None:
            return self._login_page()
        rows = [
            [
                f'<a href="/sessions/{esc(r.file)}">{esc(r.session_id)}</a>',
                esc(r.last_activity),
                esc(r.messages),
            ]
            for r in await self._counts.all()
        ]
        body = '<p><a href="/">back</a></p>' + table(rows, ["session", "last activity", "messages"])
        return page("Sessions", body)

    async def _session_page(self, request: web.Request) -> web.Response:
        if self._session(request) is None:
            return self._login_page()
        row = await self._counts.one(request.match_info["file"])
        if row is None:
            raise web.HTTPNotFound()
        usage = [u for u in await self._host.usage_today() if safe_name(u.session) == row.file]
        name = usage[0].session if usage else row.session_id
        tokens = sum(u.total_tokens for u in usage)
        body = (
            '<p><a href="/sessions">sessions</a></p>'
            f"<p>last activity {esc(row.last_activity)}; {esc(row.messages)} messages; "
            f"today {sum(u.calls for u in usage)} model calls, {tokens} tokens</p>"
            f"<h2>Summary</h2><pre>{esc(row.summary or '(none yet)')}</pre>"
        )
        return page(f"Session {name}", body)

    async def _audit(self, request: web.Request) -> web.Response:
        if self._session(request) is None:
            return self._login_page()
        status, newest = await audit_status(self._host.data_dir)
        # One list gives both the headers and each row's cells, so they cannot disagree.
        columns = [("at", "time"), ("session", "session"), ("tool", "tool")]
        columns += [("decision", "decision"), ("by", "by")]
        rows = [[plain(r.get(key, "")) for _, key in columns] for r in newest]
        body = f'<p><a href="/">back</a></p><p><strong>{esc(status)}</strong></p>' + table(
            rows, [head for head, _ in columns]
        )
        return page("Audit log", body)

    # --- forms ------------------------------------------------------------------------
    async def _approve(self, request: web.Request) -> web.StreamResponse:
        await self._checked(request)
        choices = {"yes": Choice.ONCE, "no": Choice.NO}
        choice = choices.get(request.match_info["choice"])
        if choice is None:
            raise web.HTTPNotFound()
        said = await self._host.answer_approval(request.match_info["id"], choice)
        if said is None:
            raise web.HTTPNotFound()
        log.info("dashboard_approval", outcome=said)
        return self._back()

    async def _cron(self, request: web.Request) -> web.StreamResponse:
        """Pause, resume, run now or remove a job, through the cron service; when it
        refuses, its words on a page (404 for a job that is not there)."""
        await self._checked(request)
        name, change = request.match_info["name"], request.match_info["change"]
        act = CRON_CHANGES.get(change)
        if act is None:
            raise web.HTTPNotFound()
        try:
            said = await act(self._host.cron, name)
        except (ValueError, StorageError) as exc:
            log.info("dashboard_cron_refused", job=name, change=change, reason=str(exc))
            response = page("Cron job", f'<p><a href="/">back</a></p><p>{esc(exc)}</p>')
            response.set_status(404 if isinstance(exc, NoSuchJob) else 409)
            return response
        log.info("dashboard_cron", job=name, change=change, said=said)
        return self._back()
