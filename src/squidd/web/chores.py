"""The operator's chores on the dashboard, the ones that needed the command line: the
channels' state (last error, restarts, last traffic), parked messages (retry, drop), the
Matrix identity and its pending verifications (the emoji, confirm or cancel: the flow of
`squidd matrix verify`), backups (list, back up now), the audit chain's state, and
`squidd doctor`'s checks on their own page.

Every change is a POST with the session's CSRF token; dropping a parked message, which
cannot be undone, asks once more (`confirm=yes` on a second form). A refusal (an unknown
id, a message being sent again) is shown in the service's own words.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import anyio
import structlog
from aiohttp import web

from squidd.errors import SquiddError
from squidd.store.parked import UnknownParkedError
from squidd.web.audit_page import audit_status
from squidd.web.gate import Gate, back
from squidd.web.host import DashboardHost
from squidd.web.render import render, words

log = structlog.get_logger()


class DoctorCheck(Protocol):
    """One line of `squidd doctor` (ops/doctor `Check`), as the page shows it."""

    @property
    def name(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def fix(self) -> str: ...

    @property
    def failed(self) -> bool: ...


Doctor = Callable[[], Awaitable[Sequence[DoctorCheck]]]

CHANNEL_FIELDS = (
    *("name", "kind", "state", "since", "detail", "restarts", "attempt"),
    *("last_inbound", "last_outbound"),
)


def _channels(snap: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{k: words(c.get(k, "")) for k in CHANNEL_FIELDS} for c in snap.get("children") or []]


def _identities(snap: Mapping[str, Any]) -> list[dict[str, str]]:
    found = []
    for child in snap.get("children") or []:
        identity = (child.get("details") or {}).get("identity")
        if isinstance(identity, Mapping):
            found.append(
                {"channel": words(child.get("name"))} | {k: words(v) for k, v in identity.items()}
            )
    return found


def _backup_rows(paths: list[Path]) -> list[dict[str, str]]:
    rows = []
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            continue
        made = datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(timespec="seconds")
        rows.append({"name": path.name, "size": f"{stat.st_size / 1024:,.1f} kB", "made": made})
    return rows


class ChorePages:
    def __init__(self, host: DashboardHost, gate: Gate, doctor: Doctor | None) -> None:
        self._host = host
        self._gate = gate
        self._doctor = doctor

    def mount(self, app: web.Application) -> None:
        app.router.add_get("/operator", self._page)
        app.router.add_get("/doctor", self._doctor_page)
        app.router.add_post("/parked/{id}/retry", self._retry)
        app.router.add_post("/parked/{id}/drop", self._drop)
        app.router.add_post("/verifications/{id}/{answer}", self._verify)
        app.router.add_post("/backups/create", self._backup)

    async def _page(self, request: web.Request) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        snap = await self._host.snapshot()
        chain, _ = await audit_status(self._host.data_dir)
        backups = await self._host.backups()
        return render(
            "operator.html",
            title="Operator",
            here="operator",
            csrf=login.csrf,
            channels=_channels(snap),
            parked=await self._host.parked(),
            identities=_identities(snap),
            verifications=await self._host.verifications(),
            backups=await anyio.to_thread.run_sync(_backup_rows, backups),
            chain=chain,
        )

    async def _doctor_page(self, request: web.Request) -> web.Response:
        login = self._gate.login(request)
        if login is None:
            return self._gate.login_page()
        checks = await self._doctor() if self._doctor is not None else None
        return render("doctor.html", title="Doctor", here="doctor", csrf=login.csrf, checks=checks)

    def _refused(self, csrf: str, what: str, status: int) -> web.Response:
        return render(
            "message.html",
            status=status,
            title="Operator",
            here="operator",
            csrf=csrf,
            back="/operator",
            message=what,
        )

    async def _retry(self, request: web.Request) -> web.StreamResponse:
        login, _ = await self._gate.checked(request)
        item_id = request.match_info["id"]
        try:
            await self._host.retry_parked(item_id)
        except UnknownParkedError:
            return self._refused(login.csrf, f"No parked message has the id {item_id}.", 404)
        except (ValueError, SquiddError) as exc:
            return self._refused(login.csrf, str(exc), 409)
        log.info("dashboard_parked_retry", item=item_id)
        return back("/operator")

    async def _drop(self, request: web.Request) -> web.StreamResponse:
        login, form = await self._gate.checked(request)
        item_id = request.match_info["id"]
        items = {item.id: item for item in await self._host.parked()}
        if item_id not in items:
            return self._refused(login.csrf, f"No parked message has the id {item_id}.", 404)
        if form.get("confirm") != "yes":
            return render(
                "confirm_drop.html",
                title="Drop a parked message?",
                here="operator",
                csrf=login.csrf,
                item=items[item_id],
            )
        try:
            await self._host.drop_parked(item_id)
        except UnknownParkedError:
            return self._refused(login.csrf, f"No parked message has the id {item_id}.", 404)
        except (ValueError, SquiddError) as exc:
            return self._refused(login.csrf, str(exc), 409)
        log.info("dashboard_parked_drop", item=item_id)
        return back("/operator")

    async def _verify(self, request: web.Request) -> web.StreamResponse:
        login, _ = await self._gate.checked(request)
        answer = {"match": True, "differ": False}.get(request.match_info["answer"])
        if answer is None:
            raise web.HTTPNotFound()
        said = await self._host.confirm_verification(request.match_info["id"], match=answer)
        if "error" in said:
            return self._refused(login.csrf, words(said["error"]), 409)
        log.info("dashboard_verification", match=answer)
        return back("/operator")

    async def _backup(self, request: web.Request) -> web.StreamResponse:
        login, _ = await self._gate.checked(request)
        try:
            made = await self._host.create_backup()
        except SquiddError as exc:
            log.warning("dashboard_backup_failed", reason=str(exc))
            return self._refused(login.csrf, f"The backup failed: {exc}", 500)
        log.info("dashboard_backup", file=made.name)
        return back("/operator")
