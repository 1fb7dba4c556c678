"""P4: how long `squidd run` takes from spawn to READY=1, and its idle resident set.

The daemon is started with `$NOTIFY_SOCKET` pointing at a datagram socket of ours, as
systemd would; the clock stops at the READY=1 it sends once every channel has started. Two
set-ups: no channel at all, and Matrix + email against the local test servers (Synapse,
Dovecot + Postfix from tests/servers, started through the same code the tests use). The
idle RSS is read a second after READY=1. Each figure is the median of several starts.

Beside the wall time, the daemon's own CPU time at READY=1 (utime + stime of the process,
its children excluded, from `/proc/<pid>/stat`): on a shared machine the wall time follows
the load more than the code, while the CPU the start itself burnt barely moves with it.

The children compile squidd's modules once into a bytecode cache of the run's own
(`PYTHONPYCACHEPREFIX` under its temporary directory, `PYTHONDONTWRITEBYTECODE` dropped)
and a first, unmeasured start fills it: an installed daemon runs from the `.pyc` files pip
wrote, so compiling the sources at every start would measure the checkout, not the daemon.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.daemon_load import rss_kib
from tests.support.config import write_daemon_config
from tests.support.daemon import daemon_env, squidd_argv
from tests.support.fake_llm import FakeLLM

API_KEY = "sk-bench-start-0000"


def _child_env(root: Path, **extra: str) -> dict[str, str]:
    env = daemon_env(PYTHONPYCACHEPREFIX=str(root / "pycache"), **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@dataclass(frozen=True)
class Start:
    seconds: float  # wall time from spawn to READY=1
    cpu_seconds: float  # the process's own utime + stime at READY=1
    rss_kib: int  # VmRSS once idle


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (its children excluded), in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def start_to_ready(config: Path, root: Path) -> tuple[float, int]:
    """Seconds from spawning `squidd run` to its READY=1, and its RSS (KiB) once idle."""
    got = start(config, root)
    return got.seconds, got.rss_kib


def start(config: Path, root: Path) -> Start:
    """One `squidd run` from spawn to READY=1: wall time, CPU time, idle RSS."""
    address = str(root / f"notify-{uuid.uuid4().hex[:6]}.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(address)
        notify.settimeout(60)
        started = time.monotonic()
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and argv
            squidd_argv(config, "run"),
            env=_child_env(root, NOTIFY_SOCKET=address),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
            elapsed = time.monotonic() - started
            cpu = cpu_seconds(proc.pid)
            time.sleep(1.0)  # idle: what start-up left behind, not its peak
            return Start(elapsed, cpu, rss_kib(proc.pid))
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            os.unlink(address)


@dataclass(frozen=True)
class StartMedians:
    seconds: float  # to READY=1, wall
    cpu_seconds: float  # of the daemon's own CPU at READY=1
    rss_mib: float  # idle


def _median_start(config: Path, root: Path, repeats: int) -> StartMedians:
    runs = [start(config, root) for _ in range(repeats)]
    return StartMedians(
        statistics.median(r.seconds for r in runs),
        statistics.median(r.cpu_seconds for r in runs),
        statistics.median(r.rss_kib for r in runs) / 1024,
    )


@contextmanager
def channel_servers() -> Iterator[Mapping[str, dict[str, Any]]]:
    """Synapse and Dovecot + Postfix on loopback, and the [matrix]/[email] sections of a bot
    on each; everything is stopped by PID and removed afterwards."""
    from tests.channels.email.mailbox import bot_email_section, start_servers, stop_servers
    from tests.servers.synapse.server import SynapseServer, default_data_root

    hs_root = Path(tempfile.mkdtemp(prefix="squidd-bench-hs-", dir=default_data_root()))
    mail_root = Path(tempfile.mkdtemp(prefix="squidd-bench-mail-", dir="/tmp"))
    mail_root.chmod(0o755)
    synapse = SynapseServer(hs_root / "hs")
    try:
        synapse.start()
        mail = start_servers(mail_root)
        bot = synapse.register(f"bench-{uuid.uuid4().hex[:8]}")
        yield {
            "matrix": {
                "enabled": True,
                "homeserver": synapse.url,
                "user_id": bot.user_id,
                "password": bot.password,
                "allowed_users": [f"@owner:{bot.user_id.split(':', 1)[1]}"],
            },
            "email": bot_email_section(mail, mail.take_bot()),
        }
    finally:
        stop_servers(mail_root)
        synapse.stop()
        shutil.rmtree(hs_root, ignore_errors=True)
        shutil.rmtree(mail_root, ignore_errors=True)


def measure(quick: bool, *, with_channels: bool) -> StartMedians:
    """Medians of several starts: wall and CPU seconds to READY=1, idle RSS in MiB."""
    repeats = 1 if quick else 5
    with FakeLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if not with_channels:
            config = write_daemon_config(
                root, llm.base_url, api_key=API_KEY, logging={"level": "info"}
            )
            start_to_ready(config, root)  # fills the bytecode cache
            return _median_start(config, root, repeats)
        with channel_servers() as sections:
            config = write_daemon_config(
                root, llm.base_url, api_key=API_KEY, logging={"level": "info"}, **sections
            )
            start_to_ready(config, root)  # the device and its keys, the bytecode cache
            return _median_start(config, root, repeats)
