"""The dashboard's conversations: every session (channel, with whom, last message, size),
one session's history a page of turns at a time (newest first) with its summary and each
tool call's audit lines, and a search over every history (the history index the
`search_history` tool uses, through the host).

A page number is part of the path (`/sessions/<file>/page/2`): the listener refuses every
query string, so a search is a POST carrying the session's CSRF token like any form.
"""

from __future__ import annotations

import structlog
from aiohttp import web

from squidd.errors import StorageError
from squidd.fs import safe_name
from squidd.web.conversation import history_page
from squidd.web.gate import Gate
from squidd.web.host import DashboardHost
from squidd.web.render import render
from squidd.web.sessions import FILE_NAME, SessionCounts, SessionRow
from squidd.web.usage_days import UsageDays

log = structlog.get_logger()

SEARCH_LIMIT = 50
MAX_QUERY = 200


class ConversationPages:
    def __init__(self, host: DashboardHost, gate: Gate, history: UsageDays) -> None:
        self._host = host
        self._gate = gate
        self._history = history
        self._counts = SessionCounts(host.data_dir)

    def mount(self, app: web.Application) -> None:
        app.router.add_get("/sessions", self._list)
        app.router.add_get("/sessions/{file}", self._first)
        app.router.add_get("/sessions/{file}/page/{page:[0-9]{1,6}}", self._page)
        app.router.add_get("/search", self._search_form)
        app.router.add_post("/search", self._search)

    async def _named(self, row: SessionRow) -> SessionRow:
        if row.session_id != row.file:
            return row
        name = (await self._history.names()).get(row.file)
        if name is None:
            return row
        return SessionRow(
            row.file,
            name,
            row.last_activity,
            row.messages,
            row.summary,
            row.size,
            row.last_message,
        )

    async def _list(self, request: web.Request) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        rows = [await self._named(row) for row in await self._counts.all()]
        return render(
            "sessions.html", title="Conversations", here="sessions", csrf=login.csrf, rows=rows
        )

    async def _first(self, request: web.Request) -> web.Response:
        return await self._show(request, 0)

    async def _page(self, request: web.Request) -> web.Response:
        return await self._show(request, int(request.match_info["page"]))

    async def _show(self, request: web.Request, page: int) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        row = await self._counts.one(request.match_info["file"])
        if row is None:
            raise web.HTTPNotFound()
        row = await self._named(row)
        shown = await history_page(self._host.data_dir, row.file, row.session_id, page)
        if page and not shown.turns:
            raise web.HTTPNotFound()
        usage = [u for u in await self._host.usage_today() if safe_name(u.session) == row.file]
        return render(
            "session.html",
            title=f"Conversation {row.session_id}",
            here="sessions",
            csrf=login.csrf,
            row=row,
            page=page,
            shown=shown,
            calls=sum(u.calls for u in usage),
            tokens=sum(u.total_tokens for u in usage),
        )

    async def _search_form(self, request: web.Request) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        return render(
            "search.html",
            title="Search the conversations",
            here="search",
            csrf=login.csrf,
            query="",
            hits=None,
            note="",
        )

    async def _search(self, request: web.Request) -> web.Response:
        login, form = await self._gate.checked(request)
        query = " ".join(form.get("q", "").split())[:MAX_QUERY]
        hits, note = [], ""
        if query:
            try:
                hits = await self._host.search_history(query, SEARCH_LIMIT)
            except StorageError as exc:
                log.warning("dashboard_search_failed", reason=str(exc))
                note = f"The search failed: {exc}"
        names = await self._history.names()
        found = []
        for hit in hits:
            # The index names a session by its history file's name until its meta does.
            session = hit.session or ""
            file = session if FILE_NAME.match(session) else safe_name(session) if session else ""
            found.append({"hit": hit, "file": file, "name": names.get(file, session)})
        return render(
            "search.html",
            title="Search the conversations",
            here="search",
            csrf=login.csrf,
            query=query,
            hits=found,
            note=note,
        )
