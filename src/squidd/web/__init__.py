"""The web dashboard, served on the API channel's listener (`/`): server-rendered HTML from
Jinja2 templates (render.py, escaped by default), one stylesheet, no build step, no CDN.

`dashboard(host)` is the dashboard's routes over a `host.DashboardHost`, the narrow view of
the daemon the pages use; the composition root builds the host and hands the routes to the
API channel (when `[api]` is on). `dashboard` holds the overview's routes and forms, `gate`
and `auth` the logins and their CSRF tokens, `conversations` the conversation pages. The
overview reads what `squidd status` reads (the host's `snapshot`), the approvals store and
the usage ledger's daily sums; a conversation's page reads its history from the end, one
page of turns at a time, and no page scans every history (search asks the index).

The pages (and aiohttp's server under them) are imported when the API's listener mounts
them, not when the composition root is handed the routes: a daemon without `[api]` never
loads them (docs/performance.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from aiohttp import web

    from squidd.web.chores import Doctor
    from squidd.web.dashboard import Dashboard
    from squidd.web.host import DashboardHost

__all__ = ["dashboard"]


def dashboard(
    host: DashboardHost, doctor: Doctor | None = None
) -> Callable[[web.Application], None]:
    """The dashboard's routes over `host`, to mount on the API channel's listener; `doctor`
    runs `squidd doctor`'s checks for its page (the caller's: web/ does not import ops/)."""
    return _Mount(host, doctor)


class _Mount:
    """Mounts the one dashboard over `host`, built at the first mount (its logins then
    last across the listener's restarts, as they did when it was built at start)."""

    def __init__(self, host: DashboardHost, doctor: Doctor | None) -> None:
        self._host = host
        self._doctor = doctor
        self._pages: Dashboard | None = None

    def __call__(self, app: web.Application) -> None:
        if self._pages is None:
            from squidd.web.dashboard import Dashboard

            self._pages = Dashboard(self._host, self._doctor)
        self._pages.mount(app)
