"""`squidd run`: check what needs the file system, build the daemon, run it until a signal.

Start-up goes in phases: the settings were parsed and validated by the CLI; here the
daemon's own checks run (data dir and workspace, both created when missing; status socket
path; channels that can be built) and only then the event loop starts. Exit codes: 0 after
SIGTERM/SIGINT, 1 on a runtime failure, 2 on a configuration problem (systemd does not
restart on it).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from squidd.commands import Commands, Start, resume_collection
from squidd.config import Settings
from squidd.core.models import Destination
from squidd.errors import EXIT_CONFIG, EXIT_FAILURE, ConfigError, SquiddError
from squidd.fs import make_private_dir
from squidd.gateway.status import DaemonAlreadyRunningError, check_socket_path, socket_path
from squidd.llm.http import async_client, tls_context

if TYPE_CHECKING:
    from squidd.gateway.channels import ChannelRegistry
    from squidd.gateway.daemon import Daemon
    from squidd.llm.health import ModelHealth
    from squidd.ops.doctor import Check

log = structlog.get_logger()


def register(commands: Commands) -> None:
    parser = commands.add(
        "run",
        help="run the daemon (channels, cron, heartbeat)",
        description="Run the daemon in the foreground until SIGTERM or Ctrl-C. With no config "
        "file, or with no channel and no model set up, it names `squidd init --interactive` "
        "and exits 2 instead of starting a daemon that can do nothing.",
        example="squidd run\nsquidd --config ./config.toml run --verbose",
        run=_run,
        start=Start.DAEMON,
    )
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="start even with no config file, channel or model (gateway.allow_empty in the "
        "config says the same)",
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from squidd.config import find_config_file

    allowed = bool(getattr(args, "allow_empty", False)) or settings.gateway.allow_empty
    problem = None if allowed else empty_start(settings, find_config_file(args.config))
    if problem:
        print(f"squidd: {problem}", file=sys.stderr, flush=True)
        return EXIT_CONFIG
    return run_command(settings)


_DEFAULT_LLM_URL = "https://api.openai.com/v1"
LONGEST_COLLECTOR_PAUSE_S = 60.0
SETUP_HINT = "run `squidd init --interactive` (scripts/squidd in a checkout) to set it up"


def empty_start(settings: Settings, config_file: Path | None) -> str | None:
    """Why this start would run a daemon that can do nothing, in one line; None when it
    can do something. No config file; or no channel (Matrix, email, the API) and no model
    (neither a key nor an endpoint of one's own)."""
    if config_file is None:
        return (
            "no config file found (~/.config/squidd/config.toml, /etc/squidd/config.toml, "
            f"SQUIDD_CONFIG or --config): {SETUP_HINT}, or start anyway with --allow-empty"
        )
    accounts = settings.matrix_accounts() or settings.mail_accounts()  # agents' own too
    channels = bool(accounts) or settings.api.enabled
    llm = settings.llm
    model = bool(llm.providers) or llm.api_key is not None or llm.base_url != _DEFAULT_LLM_URL
    if channels or model:
        return None
    return (
        f"{config_file} enables no channel and sets up no model: {SETUP_HINT}, or set "
        "gateway.allow_empty = true (cron and heartbeat only)"
    )


def _prepare(settings: Settings) -> list[str]:
    """Checks that need the file system, before anything starts."""
    problems: list[str] = []
    data_dir = settings.storage.data_dir
    try:
        make_private_dir(data_dir)
    except OSError as exc:
        problems.append(f"storage.data_dir: cannot create {data_dir}: {exc.strerror or exc}")
    problem = check_socket_path(socket_path(settings))
    if problem:
        problems.append(f"storage.data_dir: {problem}")
    # The workspace is the tools' working directory (the shell runs in it): made here, or
    # the start refused naming it, never a shell tool failing later as if the command were
    # missing.
    workspace = settings.workspace_dir
    try:
        make_private_dir(workspace)
    except OSError as exc:
        key = "agents.workspace" if settings.agents.workspace else "storage.data_dir"
        problems.append(f"{key}: cannot create the workspace {workspace}: {exc.strerror or exc}")
    else:
        if not workspace.is_dir():
            problems.append(f"agents.workspace: {workspace} is not a directory")
    if settings.heartbeat.enabled and not Destination.parse(settings.heartbeat.target):
        log.warning(
            "heartbeat_without_target",
            note="heartbeat replies are kept in the heartbeat session only",
        )
    return problems


def _open_data_dir(settings: Settings) -> list[str]:
    """The data dir's format: a newer one refused, an older one migrated (after a backup)."""
    from squidd.gateway.backups import prepare_data_dir

    try:
        prepare_data_dir(settings)
    except SquiddError as exc:  # too new; or a file that cannot be read, named
        return [f"storage.data_dir: {exc}"]
    except OSError as exc:
        return [f"storage.data_dir: cannot create {settings.storage.data_dir}: {exc.strerror}"]
    return []


async def _doctor(settings: Settings) -> list[Check]:
    """`squidd doctor`'s checks for the dashboard's page, without the one-token request."""
    from squidd.ops.doctor.report import run_checks

    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 - the null device never blocks
        return await run_checks(settings, llm_call=False, errlog=errlog)


def run_command(settings: Settings, *, channels: ChannelRegistry | None = None) -> int:
    """`squidd run`; `channels` replaces the built-in channel registry (tests, embedding)."""
    # The daemon's modules load here, not with the parser every command builds.
    from squidd.gateway.build import build_daemon
    from squidd.web import dashboard  # the dashboard on the API's listener, when [api] is on

    # The format first: nothing is created in a data dir this squidd must not touch.
    problems = _open_data_dir(settings)
    if not problems:
        problems = _prepare(settings)
    daemon: Daemon | None = None
    try:
        pages = functools.partial(dashboard, doctor=functools.partial(_doctor, settings))
        daemon = build_daemon(settings, channels=channels, dashboard=pages)
    except ConfigError as exc:
        problems.extend(exc.problems)
    if problems or daemon is None:
        for problem in problems:
            print(f"config: {problem}", flush=True, file=sys.stderr)
        return EXIT_CONFIG
    if not daemon.channels:
        log.warning("no_channel_enabled", note="only cron and heartbeat will run")
    serving = daemon

    async def main() -> int:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_resume_collection_when_ready, serving)
                tg.start_soon(_check_model_when_ready, serving, settings)
                code = await serving.serve()
                tg.cancel_scope.cancel()
            return code
        finally:
            with anyio.CancelScope(shield=True):
                await serving.runtime.aclose()

    try:
        return anyio.run(main)
    except Exception as exc:
        inner = _unwrap(exc)
        if isinstance(inner, DaemonAlreadyRunningError):
            log.error("daemon_not_started", reason=str(inner))  # noqa: TRY400 - expected
        else:
            log.exception("daemon_failed", reason=f"{type(inner).__name__}: {inner}")
        return EXIT_FAILURE


async def _resume_collection_when_ready(
    daemon: Daemon, longest_pause_s: float = LONGEST_COLLECTOR_PAUSE_S
) -> None:
    """The garbage collector, paused for start-up (squidd.commands.pause_collection), on
    again once READY=1 is sent: one collection of what start-up left, its survivors frozen.
    A start that takes longer than `longest_pause_s` (a channel's first attempt hanging)
    gets it back then: the pause is for a start's seconds, never a daemon's hours."""
    with anyio.move_on_after(longest_pause_s):
        await daemon.ready.wait()
    resume_collection(freeze=True)


async def _check_model_when_ready(daemon: Daemon, settings: Settings) -> None:
    """The model check once READY=1 is sent: its HTTP client (httpcore2 and its HTTP/2
    half, imported with the first client) is then not on the start's path."""
    await daemon.ready.wait()
    # The endpoints' shared TLS context reads the CA bundle: built here in a worker thread,
    # so neither this check's client nor a turn's reads it on the event loop.
    await anyio.to_thread.run_sync(tls_context)
    await check_model(settings, daemon.runtime.llm.health)


async def check_model(settings: Settings, health: ModelHealth) -> None:
    """The endpoint tried once at start (its model list, no tokens spent): a warning naming
    the cause when it does not answer, never a refusal; `squidd status` shows the result.
    With providers, each is tried (every key, llm/survey.py): a warning line per provider
    that does not answer; the chain is failing at start only when none answers (a turn
    falls over to the others)."""
    from squidd.errors import LLMError
    from squidd.llm.probe import list_models

    if settings.llm.providers:
        await _check_providers(settings, health)
        return
    try:
        await list_models(settings.llm)
    except LLMError as exc:
        health.checked_at_start(str(exc))
        log.warning(
            "model_unreachable_at_start",
            base_url=settings.llm.base_url,
            reason=str(exc),
            note="squidd runs; turns fail until the endpoint answers (squidd status shows it)",
        )
    else:
        health.checked_at_start(None)


async def _check_providers(settings: Settings, health: ModelHealth) -> None:
    import httpx2

    from squidd.llm.survey import try_provider

    cfg = settings.llm
    timeout = httpx2.Timeout(cfg.connect_timeout_s * 2, connect=cfg.connect_timeout_s)
    failed: list[str] = []
    async with async_client(timeout=timeout) as client:
        for provider in cfg.resolved_providers():
            trial = await try_provider(provider, client=client)
            for number in trial.refused:
                log.warning(
                    "llm_key_refused_at_start",
                    provider=provider.name,
                    key=f"key {number}",
                    fix=f"replace key {number} of provider {provider.name}",
                )
            if trial.ok:
                continue
            failed.append(f"{provider.name}: {trial.reason}")
            log.warning(
                "model_unreachable_at_start",
                provider=provider.name,
                base_url=provider.base_url,
                reason=trial.reason,
                note="squidd runs; turns fall over to the other providers (squidd status)",
            )
    everyone = len(failed) == len(cfg.resolved_providers())
    health.checked_at_start("; ".join(failed) if everyone else None)


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
