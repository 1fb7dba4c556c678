"""The dashboard's chat: a conversation with the assistant through the API channel, in
the browser, the answer shown as it is written.

A message goes to the API channel like any request (`submit`, the logged-in key's id,
the conversation `dashboard`, session `api:dashboard`), so `/new`, `/model`, `/stop` and
approvals work as on every channel. `/chat/stream` answers a POST (CSRF token in the form,
like every form) with one JSON object per line as the request moves: `{"draft": text}` as
the answer is written, `{"part": text, "question": id}` for each message sent for it (an
approval question carries its id, answered in place through `/approvals/<id>/yes|no`), and
`{"done": true}`. static/chat.js (served by squidd, `script-src 'self'`) reads that stream
and writes every text with `textContent`, never as markup. Without the script the form
posts to `/chat`, which waits for the first message and shows it as a page.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog
from aiohttp import web

from squidd.channels.api.requests import Pending, StoredAnswer
from squidd.channels.api.server import CHANNEL
from squidd.channels.api.wire import BadRequest
from squidd.web.gate import Gate
from squidd.web.host import DashboardHost
from squidd.web.render import HEADERS, render

log = structlog.get_logger()

CONVERSATION = "dashboard"
SESSION = f"api:{CONVERSATION}"
MAX_CHARS = 16_000
KEEPALIVE_S = 15.0
Emit = Callable[[dict[str, Any]], Awaitable[None]]


def _page(csrf: str, said: list[dict[str, str]]) -> web.Response:
    return render("chat.html", title="Chat", here="chat", csrf=csrf, said=said)


class ChatPages:
    def __init__(self, host: DashboardHost, gate: Gate) -> None:
        self._host = host
        self._gate = gate

    def mount(self, app: web.Application) -> None:
        app.router.add_get("/chat", self._page)
        app.router.add_post("/chat", self._plain)
        app.router.add_post("/chat/stream", self._stream)

    async def _page(self, request: web.Request) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        return _page(login.csrf, [])

    async def _submit(self, request: web.Request) -> tuple[str, str, Pending | StoredAnswer]:
        login, form = await self._gate.checked(request)
        text = form.get("text", "").replace("\r\n", "\n").strip()
        if not text or len(text) > MAX_CHARS:
            raise web.HTTPBadRequest(text=f"a message is 1 to {MAX_CHARS} characters")
        try:
            answer = await request.app[CHANNEL].submit(
                login.key_id, CONVERSATION, text, "", drafts=True
            )
        except BadRequest as exc:
            raise web.HTTPServiceUnavailable(text=str(exc)) from None
        log.info("dashboard_chat", chars=len(text))
        return login.csrf, text, answer

    async def _question(self, text: str) -> str:
        """The id of the waiting approval question `text` asks, or ""."""
        waiting = await self._host.approvals_waiting()
        return next((q.id for q in waiting if q.session == SESSION and q.id in text), "")

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        _, _, answer = await self._submit(request)
        headers = {**HEADERS, "Content-Type": "application/x-ndjson; charset=utf-8"}
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)

        async def emit(event: dict[str, Any]) -> None:
            line = json.dumps(event, ensure_ascii=True) + "\n"
            await response.write(line.encode())

        try:
            if isinstance(answer, Pending):
                await self._follow(answer, emit)
            else:
                await emit({"part": answer.text, "question": ""})
            await emit({"done": True})
            await response.write_eof()
        except ConnectionError:
            log.info("dashboard_chat_gone")  # the turn goes on; its reply is in the history
        return response

    async def _follow(self, answer: Pending, emit: Emit) -> None:
        written, draft = 0, ""
        while True:
            changed = answer.changed
            if answer.draft != draft and written == len(answer.parts):
                draft = answer.draft
                await emit({"draft": draft})
            while written < len(answer.parts):
                part = answer.parts[written]
                await emit({"part": part, "question": await self._question(part)})
                written += 1
                draft = answer.draft
            if answer.done.is_set():
                return
            with anyio.move_on_after(KEEPALIVE_S):
                await changed.wait()
            if not changed.is_set():
                await emit({"alive": True})

    async def _plain(self, request: web.Request) -> web.Response:
        """Without the script: wait for the first message sent for it, show it as a page."""
        csrf, text, answer = await self._submit(request)
        parts: list[str] = []
        if isinstance(answer, Pending):
            while not answer.parts and not answer.done.is_set():
                await answer.changed.wait()
            parts = list(answer.parts)
        else:
            parts = [answer.text]
        said = [{"who": "you", "text": text, "question": ""}]
        said += [{"who": "squidd", "text": p, "question": await self._question(p)} for p in parts]
        return _page(csrf, said)
