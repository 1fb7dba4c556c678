"""The servers' checks: the LLM endpoint and model, the Matrix account, the mailbox's IMAP
and SMTP servers, each MCP server. Each failure names the config key to fix."""

from __future__ import annotations

from typing import Any, TextIO

from squidd.channels.email.probe import ImapFacts, probe_imap, probe_smtp
from squidd.channels.matrix.identity.api import ApiError
from squidd.channels.matrix.probe import MatrixProbe
from squidd.config import Settings
from squidd.errors import ConfigError, LLMCredentialsError, LLMError, SquiddError
from squidd.gateway.mcp import connected_mcp
from squidd.llm.probe import list_models, one_token
from squidd.ops.doctor import Check, attempt

__all__ = ["email_checks", "llm_checks", "matrix_checks", "mcp_checks"]

_NET = (SquiddError, ApiError, OSError)


def _llm_fix(exc: Exception) -> str:
    if isinstance(exc, LLMCredentialsError):
        return "the endpoint refused the key: set llm.api_key (or llm.api_key_file) to a valid key"
    return "check llm.base_url and that the endpoint is up and reachable from here"


async def llm_checks(settings: Settings, *, call: bool) -> list[Check]:
    cfg = settings.llm
    name = "LLM endpoint and model"

    async def models() -> Check:
        listed = await list_models(cfg)
        if listed is None:
            return Check.ok(name, f"{cfg.base_url} answers (it lists no models)")
        if cfg.model not in listed:
            offered = ", ".join(listed[:8]) + (" …" if len(listed) > 8 else "")
            return Check.fail(
                name,
                f"{cfg.base_url} does not offer model {cfg.model!r}",
                f"set llm.model to one it offers: {offered or '(none listed)'}",
            )
        return Check.ok(name, f"{cfg.base_url} offers {cfg.model}")

    first = await attempt(name, models, _llm_fix, (LLMError,))
    checks = [first]
    call_name = "LLM answers"
    if not call:
        checks.append(Check.skip(call_name, "no request made (--no-llm-call)"))
    elif first.failed:
        checks.append(Check.skip(call_name, "the endpoint check failed"))
    else:

        async def ask() -> Check:
            await one_token(cfg)
            return Check.ok(call_name, f"{cfg.model} answered a one-token request")

        checks.append(await attempt(call_name, ask, _llm_fix, (LLMError,)))
    return checks


def _matrix_fix(exc: Exception) -> str:
    text = str(exc)
    if isinstance(exc, ApiError) and exc.errcode in ("M_FORBIDDEN", "M_UNKNOWN_TOKEN"):
        return (
            "the homeserver refused the login: check matrix.user_id and matrix.password "
            "(or access_token)"
        )
    if "unreachable" in text:
        return "start the homeserver or fix matrix.homeserver; it must be reachable from here"
    return "check the [matrix] section (homeserver, user_id, password or access_token)"


async def matrix_checks(settings: Settings, status: dict[str, Any] | None) -> list[Check]:
    """Each bot account: `[matrix]`'s ("Matrix ...") and each agent's own ("Matrix
    (<agent>) ...")."""
    accounts = settings.matrix_accounts()
    if not accounts:
        return [Check.skip("Matrix", "the channel is off (matrix.enabled = false)")]
    checks: list[Check] = []
    for account in accounts:
        label = "Matrix" if account.channel == "matrix" else f"Matrix ({account.agent})"
        checks += await _account_checks(account.settings, status, account.channel, label)
    return checks


async def _account_checks(
    settings: Settings, status: dict[str, Any] | None, channel: str, label: str
) -> list[Check]:
    cfg = settings.matrix
    probe = MatrixProbe(cfg, settings.storage.data_dir)
    try:

        async def login() -> Check:
            user = await probe.login()
            return Check.ok(f"{label} login", f"{user} on {cfg.homeserver}")

        first = await attempt(f"{label} login", login, _matrix_fix, _NET)
        if first.failed:
            after = ("sync", "device keys", "cross-signing", "rooms")
            return [first, *(Check.skip(f"{label} {n}", "no login") for n in after)]
        return [first, *await _matrix_after_login(probe, settings, status, channel, label)]
    finally:
        await probe.close()


async def _matrix_after_login(
    probe: MatrixProbe,
    settings: Settings,
    status: dict[str, Any] | None,
    channel: str,
    label: str,
) -> list[Check]:
    running = status is not None

    async def sync() -> Check:
        await probe.sync()
        live = _daemon_channel(status, channel)
        return Check.ok(
            f"{label} sync", "answers" + (f"; the daemon's sync: {live}" if live else "")
        )

    async def keys() -> Check:
        published = await probe.device_keys_published()
        if published is None:
            return Check.skip(
                f"{label} device keys", "no daemon device yet (`squidd run` makes it)"
            )
        if not published and not running:
            return Check.skip(
                f"{label} device keys",
                f"device {probe.daemon_device} has none yet; `squidd run` uploads them",
            )
        if not published:
            return Check.fail(
                f"{label} device keys",
                f"device {probe.daemon_device} has published no keys",
                "start `squidd run` (it uploads them); if it runs, see its log",
            )
        return Check.ok(f"{label} device keys", f"device {probe.daemon_device} published its keys")

    async def cross() -> Check:
        if not settings.matrix.e2ee:
            return Check.skip(f"{label} cross-signing", "e2ee is off")
        state = await probe.cross_signing()
        problem = state.problem()
        if problem is None:
            return Check.ok(f"{label} cross-signing", f"master key {state.master}, device signed")
        # A daemon creates the identity and signs its device when it starts; only a missing
        # identity key (restore needed) is wrong before that. An identity made and kept here
        # (`init --interactive`, `matrix bootstrap`) is done: the daemon only signs its device.
        if not running and state.master is not None and state.keys_here:
            return Check.ok(
                f"{label} cross-signing",
                f"master key {state.master}; `squidd run` signs its device when it starts",
            )
        if not running and state.master is None:
            return Check.skip(f"{label} cross-signing", "not done yet; `squidd run` does it")
        return Check.fail(f"{label} cross-signing", f"master key {state.master}", problem)

    async def rooms() -> Check:
        return Check.ok(f"{label} rooms", f"joined {await probe.joined_rooms()}")

    return [
        await attempt(name, step, _matrix_fix, _NET)
        for name, step in (
            (f"{label} sync", sync),
            (f"{label} device keys", keys),
            (f"{label} cross-signing", cross),
            (f"{label} rooms", rooms),
        )
    ]


def _daemon_channel(status: dict[str, Any] | None, name: str) -> str:
    for child in (status or {}).get("children", []):
        if child.get("name") == name:
            return str(child.get("state", "?"))
    return ""


def _mail_fix(which: str, key: str) -> Any:
    def fix(exc: Exception) -> str:
        if "login" in str(exc):
            return f"the {which} server refused the login: check {key}"
        if "certificate" in str(exc):
            return "the server's certificate is not trusted: set email.ca_file to its CA"
        host = "email.imap_host/imap_port" if which == "IMAP" else "email.smtp_host/smtp_port"
        return f"check {host} and the security setting; the server must be reachable"

    return fix


async def email_checks(settings: Settings) -> list[Check]:
    """Each mailbox: `[email]`'s ("IMAP login", ...) and each agent's own ("IMAP login
    (<agent>)", ...)."""
    accounts = settings.mail_accounts()
    if not accounts:
        return [Check.skip("email", "the channel is off (email.enabled = false)")]
    checks: list[Check] = []
    for account in accounts:
        mark = "" if account.channel == "email" else f" ({account.agent})"
        checks += await _mailbox_checks(account.settings, mark)
    return checks


async def _mailbox_checks(settings: Settings, mark: str) -> list[Check]:
    cfg = settings.email
    found: list[ImapFacts] = []

    async def imap() -> Check:
        found.append(await probe_imap(cfg))
        where = f"{cfg.username} at {cfg.imap_host}:{cfg.imap_port}, {cfg.folder}"
        return Check.ok(f"IMAP login{mark}", f"{where}, UIDVALIDITY {found[0].uidvalidity}")

    fix = _mail_fix("IMAP", "email.username and email.password (or password_file)")
    first = await attempt(f"IMAP login{mark}", imap, fix, (*_NET, ConfigError))
    checks = [first]
    idle = f"IMAP IDLE{mark}"
    if first.failed:
        checks.append(Check.skip(idle, "no login"))
    elif found[0].idle or not cfg.idle:
        checks.append(Check.ok(idle, "offered" if found[0].idle else "not used"))
    else:
        checks.append(
            Check.fail(
                idle,
                "the server does not offer IDLE",
                "set email.idle = false (then squidd polls every email.poll_interval_s)",
            )
        )

    async def smtp() -> Check:
        logged_in = await probe_smtp(cfg)
        how = "logged in" if logged_in else "connected (no login configured)"
        where = f"at {cfg.smtp_host}:{cfg.smtp_port}, no mail sent"
        return Check.ok(f"SMTP login{mark}", f"{how} {where}")

    key = "email.smtp_username and email.smtp_password (or the IMAP login)"
    name = f"SMTP login{mark}"
    checks.append(await attempt(name, smtp, _mail_fix("SMTP", key), (*_NET, ConfigError)))
    return checks


async def mcp_checks(settings: Settings, errlog: TextIO) -> list[Check]:
    """Each server connected as the daemon would; their own stderr goes to `errlog`."""
    servers = [s for s in settings.mcp.servers if s.enabled]
    if not servers:
        return []
    checks: list[Check] = []
    async with connected_mcp(settings, errlog=errlog) as hub:
        for name, server in hub.servers.items():
            info = server.snapshot()
            label = f"MCP {name}"
            if server.tools():
                checks.append(Check.ok(label, f"handshake done, {info['tools']} tool(s)"))
            else:
                checks.append(
                    Check.fail(
                        label,
                        f"{info['state']}: {info['last_error'] or 'no tools'}",
                        f"check [[mcp.servers]] {name!r} (command, args, url); "
                        f"`squidd mcp list` shows its errors",
                    )
                )
    return checks
