"""The web dashboard, served on the API channel's listener (`/`): server-rendered HTML, no
script, no build step, no CDN.

`attach(daemon)` hands the running daemon's dashboard routes to its API channel (when
`[api]` is on); `dashboard` holds the pages and forms, `auth` the login sessions and
their CSRF tokens. The pages read what `squidd status` reads (`Daemon.snapshot`) and the
approvals store; nothing on a page scans history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from squidd.gateway.daemon import Daemon

__all__ = ["attach"]


def attach(daemon: Daemon) -> bool:
    """Mount the dashboard on the daemon's API channel; False when there is none."""
    from squidd.channels.api import ApiChannel
    from squidd.web.dashboard import Dashboard

    channel = daemon.channels.get("api")
    if not isinstance(channel, ApiChannel):
        return False
    channel.pages = Dashboard(daemon, channel).mount
    return True
