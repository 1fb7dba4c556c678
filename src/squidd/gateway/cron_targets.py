"""A cron job's target checked when the job is added, by whoever adds it (`squidd cron add`,
the cron tool, the dashboard: all through `core/cron_service.CronJobs`).

First what the config says: the channel exists and is enabled, and the address has that
channel's form (`matrix:!room:server`, `matrix:#alias:server`, `matrix:@person:server`,
`email:someone@example.org`); `telegram:1` is refused naming the channels there are. Then,
when the channel can tell (`<channel>.check_target`, one of its operator requests), whether
the room or person is reachable: the Matrix channel resolves an alias to its room, finds or
creates the direct chat with a person, and refuses a room the bot is not in. The daemon asks
its channel directly; the command line asks the running daemon through the status socket,
and with no daemon running keeps the target as written (checked again at delivery).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio

from squidd.config import Settings
from squidd.core.models import Destination, channel_kind
from squidd.core.ports import ControlOp
from squidd.gateway.status import ask, socket_path

__all__ = ["CHECK_OP", "command_line_check", "config_check", "daemon_check"]

CHECK_OP = "{channel}.check_target"
_CHANNELS = ("matrix", "email", "api")
_FORMS = {
    "matrix": "matrix:!room:server, matrix:#alias:server or matrix:@person:server",
    "email": "email:someone@example.org",
}

CheckTarget = Callable[[str], Awaitable[str]]


def config_check(settings: Settings, target: str, running: Iterable[str] = ()) -> Destination:
    """The target's channel and address as the config allows them; ValueError saying why
    not. A channel in `running` that is not built in (one a test or an embedding handed
    the daemon) is taken as it is."""
    found = Destination.parse(target)
    if found is None:
        raise ValueError(
            f"target {target!r} must be a channel, a colon and an address ({_FORMS['matrix']}, "
            f"or {_FORMS['email']})"
        )
    channel, address = str(found.channel), found.target
    accounts = [*settings.matrix_accounts(), *settings.mail_accounts()]
    if channel in {a.channel for a in accounts} - {"matrix", "email"}:
        kind = channel_kind(channel)  # an agent's own account or mailbox
        if not _has_form(kind, address):
            raise ValueError(f"target {target!r}: a target of {channel} looks like {_FORMS[kind]}")
        return found
    if channel in running and channel not in _CHANNELS:
        return found
    if channel not in _CHANNELS:
        # Name the channels this config delivers through: an agent's own account's name
        # (`matrix-planner`) is the one a typo most likely missed.
        known = [name for name in settings.channel_names() if name != "api"]
        there = ", ".join(known) if known else "none enabled; matrix and email are built in"
        raise ValueError(f"target {target!r}: squidd has no {channel!r} channel ({there})")
    if channel == "api":
        raise ValueError(f"target {target!r}: the API cannot start a conversation")
    if not getattr(settings, channel).enabled:
        raise ValueError(
            f"target {target!r}: the {channel} channel is not enabled ({channel}.enabled)"
        )
    if not _has_form(channel, address):
        raise ValueError(f"target {target!r}: a {channel} target looks like {_FORMS[channel]}")
    return found


def _has_form(channel: str, address: str) -> bool:
    if channel == "matrix":
        if address.startswith("!"):  # newer room versions' ids name no server
            return len(address) > 1 and " " not in address
        local, _, server = address[1:].partition(":")
        return address[:1] in "#@" and bool(local) and bool(server)
    local, at, domain = address.rpartition("@")
    return bool(local) and bool(at) and "." in domain and " " not in address


def _answer(target: str, answer: Mapping[str, Any]) -> str:
    if "error" in answer:
        raise ValueError(f"target {target!r}: {answer['error']}")
    resolved = answer.get("target")
    return str(resolved) if resolved else target


def daemon_check(
    settings: Settings, channels: Iterable[str], ops: Callable[[], Mapping[str, ControlOp]]
) -> CheckTarget:
    """In the daemon: the config's check (`channels`: the ones it runs), then the channel's
    own (`ops()`: the channels' operator requests, read when a job is added)."""
    running = frozenset(channels)

    async def check(target: str) -> str:
        found = config_check(settings, target, running)
        op = ops().get(CHECK_OP.format(channel=found.channel))
        if op is None:
            return target
        return _answer(target, await op({"address": found.target}))

    return check


def command_line_check(settings: Settings) -> CheckTarget:
    """From the command line: the config's check, then the running daemon's channel."""
    path = socket_path(settings)

    async def check(target: str) -> str:
        found = config_check(settings, target)
        request = {"op": CHECK_OP.format(channel=found.channel), "address": found.target}
        try:
            answer = await anyio.to_thread.run_sync(_ask, path, request)
        except OSError:
            return target  # no daemon: checked again when the job delivers
        if "error" in answer and "answers no request" in str(answer["error"]):
            return target  # a channel with no check of its own
        return _answer(target, answer)

    return check


def _ask(path: Path, request: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return ask(path, request, timeout_s=30.0)
    except (ValueError, TypeError) as exc:
        return {"error": f"the daemon's answer could not be read: {exc}"}
