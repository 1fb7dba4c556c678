"""The machine's checks: data dir and workspace, free disk, file modes, the daemon on this
data dir (and a second one beside it), the systemd unit.

Blocking file-system and /proc reads are small; the caller runs them in a worker thread.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from squidd.config import Settings
from squidd.core.cron import JobListError
from squidd.core.models import SessionId
from squidd.errors import StorageError
from squidd.gateway.status import ask, socket_path
from squidd.gateway.unattended import denied_on_disk, fix_for, scheduled_sessions
from squidd.ops.doctor import Check
from squidd.store.approvals import QuestionFiles
from squidd.store.cron_jobs import JobsFile
from squidd.tools.policy import ConfiguredToolPolicy, configured_tools

__all__ = [
    "MIN_FREE_BYTES",
    "daemon_checks",
    "disk_checks",
    "systemd_check",
    "unattended_check",
]

MIN_FREE_BYTES = 200 * 1024 * 1024
UNIT_PATHS = (
    Path("/etc/systemd/system/squidd.service"),
    Path.home() / ".config/systemd/user/squidd.service",
)


def _writable(name: str, path: Path, key: str) -> Check:
    if not path.exists():
        return Check.fail(
            name, f"{path} does not exist", f"run `squidd init` or create it (mkdir -m 700 {path})"
        )
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check.fail(
            name,
            f"{path} is not writable: {exc.strerror or exc}",
            f"give the user running squidd write access to it, or set {key} elsewhere",
        )
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        return Check.fail(
            name,
            f"{path} is writable but mode {mode:o} lets other local users in",
            f"chmod 700 {path}",
        )
    return Check.ok(name, f"{path} writable, mode {mode:o}")


def disk_checks(settings: Settings) -> list[Check]:
    data = settings.storage.data_dir
    checks = [
        _writable("data dir", data, "storage.data_dir"),
        _writable("workspace", settings.workspace_dir, "agents.workspace"),
    ]
    probe = data if data.exists() else data.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError as exc:
        checks.append(Check.fail("free disk", f"cannot read: {exc.strerror}", "check the path"))
        return checks
    mib = free // (1024 * 1024)
    if free < MIN_FREE_BYTES:
        checks.append(
            Check.fail(
                "free disk",
                f"{mib} MiB free under {probe}",
                f"free at least {MIN_FREE_BYTES // (1024 * 1024)} MiB there",
            )
        )
    else:
        checks.append(Check.ok("free disk", f"{mib} MiB free under {probe}"))
    return checks


def _socket_inodes(path: Path) -> set[str]:
    """Inodes of the unix sockets bound to `path` (Linux /proc/net/unix)."""
    inodes: set[str] = set()
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return inodes
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[7] == str(path):
            inodes.add(fields[6])
    return inodes


def daemons_listening(path: Path) -> list[int]:
    """The pids holding a socket bound to the status socket path: one per daemon."""
    wanted = {f"socket:[{inode}]" for inode in _socket_inodes(path)}
    pids: list[int] = []
    if not wanted:
        return pids
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except OSError:
            continue  # gone, or another user's process
        if links & wanted:
            pids.append(int(entry.name))
    return sorted(pids)


def daemon_checks(settings: Settings) -> tuple[list[Check], dict[str, Any] | None]:
    """Whether a daemon answers on this data dir (its status document, if so) and whether
    more than one runs on it."""
    path = socket_path(settings)
    try:
        status: dict[str, Any] | None = ask(path, {"op": "status"}, 5.0)
    except (OSError, ValueError, TypeError):
        status = None
    if status is not None and "error" in status:
        status = None
    if status is None:
        checks = [Check.ok("daemon", f"not running on this data dir (no answer on {path})")]
    else:
        checks = [Check.ok("daemon", f"running, pid {status.get('pid')}, answers on {path}")]
    pids = daemons_listening(path)
    if len(pids) > 1:
        listed = ", ".join(str(pid) for pid in pids)
        checks.append(
            Check.fail(
                "one daemon per data dir",
                f"{len(pids)} processes serve {path}: pids {listed}",
                "stop all but one (`kill PID`); two daemons answer every message twice",
            )
        )
    else:
        checks.append(Check.ok("one daemon per data dir", "no second daemon"))
    return checks, status


def systemd_check() -> Check | None:
    """The unit's state when it is installed; None when it is not."""
    unit = next((path for path in UNIT_PATHS if path.exists()), None)
    if unit is None:
        return None
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return Check.skip("systemd unit", f"{unit} installed, but no systemctl here")
    user = ["--user"] if unit.is_relative_to(Path.home()) else []
    flag = "--user " if user else ""
    result = subprocess.run(  # noqa: S603 - a fixed command line
        [systemctl, *user, "is-active", "squidd"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    state = result.stdout.strip() or "unknown"
    if state == "active":
        return Check.ok("systemd unit", f"{unit}: active")
    return Check.fail(
        "systemd unit",
        f"{unit}: {state}",
        f"`systemctl {flag}enable --now squidd`, then "
        f"`journalctl {flag}-u squidd` if it does not stay up",
    )


def unattended_check(settings: Settings) -> Check:
    """The cron jobs (and the heartbeat) whose tools need an approval no one can give in
    their runs: offered them by the policy, or denied them already (gateway/unattended.py)."""
    name = "cron and heartbeat approvals"
    data = settings.storage.data_dir
    approval = settings.tools.approval
    try:
        jobs = [job.name for job in JobsFile(data).load_sync()] if settings.cron.enabled else []
        questions = QuestionFiles(data).questions_sync()
    except (StorageError, JobListError, OSError) as exc:
        return Check.skip(name, f"cannot read the cron jobs or the approvals: {exc}")
    policy = ConfiguredToolPolicy.from_settings(settings.tools)
    offered = set(configured_tools(settings.tools))
    tools: dict[str, set[str]] = {}
    said: list[str] = []
    for channel, session in scheduled_sessions(jobs, settings.heartbeat.enabled):
        allowed = approval.unattended.get(session, [])
        will = [
            tool
            for tool in approval.tools
            if tool in offered
            and tool not in allowed
            and policy.allows(tool, channel, SessionId(session))
        ]
        if will:
            tools.setdefault(session, set()).update(will)
            said.append(f"{session}: {', '.join(will)} will be denied")
    for session, denied in denied_on_disk(questions, approval.unattended).items():
        tools.setdefault(session, set()).update(q.tool for q in denied)
        said.append(
            f"{session}: {', '.join(sorted({q.tool for q in denied}))} denied "
            f"{len(denied)} time(s), last {denied[-1].asked_at:%Y-%m-%d %H:%M} UTC"
        )
    if not said:
        return Check.ok(name, "no cron job or heartbeat has a tool that needs an approval")
    return Check.fail(
        name,
        "no one is there to approve a tool call in these runs: " + "; ".join(said),
        "; ".join(fix_for(session, found) for session, found in sorted(tools.items())),
    )
