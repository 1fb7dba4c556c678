"""The real servers the end-to-end tests share: one Synapse and one Dovecot + Postfix.

Both fixtures are session-scoped and made available to every test by the root conftest:
each worker of a pytest-xdist run (and a run without workers) starts a server the first
time one of its tests needs it, on free loopback ports in a data dir of its own, and stops
it by PID when its last test is done. Tests stop and restart them (a homeserver restart,
Postfix down) and put them back as they were; each test has accounts of its own (a fresh
Matrix user, a bot mailbox with an empty INBOX), so tests share a server without seeing
each other's rooms or mail. One start per worker instead of one per package: a Synapse
start is about 2.5 s of CPU, a mail start about 8 s of wall time, and the suite is bound by
its CPU on two cores (docs/performance.md, "CI time").

How long each server was up (install and start included) is a line of the run's summary
(tests/support/summary.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.channels.email.mailbox import MailServer, start_servers, stop_servers
from tests.servers.synapse.server import SynapseServer, default_data_root
from tests.support.summary import note, worker_id

__all__ = ["mail_server", "running_synapse", "synapse"]


@contextmanager
def running_synapse(prefix: str, *, stock_limits: bool = False) -> Iterator[SynapseServer]:
    """A homeserver in a fresh folder (named from `prefix`), stopped by PID and removed."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=default_data_root()))
    server = SynapseServer(root / "hs", stock_limits=stock_limits)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def synapse() -> Iterator[SynapseServer]:
    """The homeserver from tests/servers/synapse, with its rate limits raised."""
    started = time.monotonic()
    try:
        with running_synapse("squidd-synapse-") as server:
            yield server
    finally:
        note(
            "real servers",
            f"synapse ({worker_id()}): {time.monotonic() - started:.1f}s "
            "(homeserver install/start, tests, stop)",
        )


def _can_run_mail_servers() -> str | None:
    if os.geteuid() != 0:
        return "the mail servers need root"
    if not (shutil.which("apt-get") or shutil.which("dovecot")):
        return "neither dovecot nor apt-get is available"
    return None


@pytest.fixture(scope="session")
def mail_server() -> Iterator[MailServer]:
    """Dovecot + Postfix (installing the Debian packages when missing), in a data dir the
    mail users (nobody, postfix, dovecot) can enter: pytest's own temp dirs are private to
    root, which Dovecot's delivery cannot use."""
    reason = _can_run_mail_servers()
    if reason:
        pytest.skip(reason)
    started = time.monotonic()
    data = Path(tempfile.mkdtemp(prefix="squidd-mail-", dir="/tmp"))
    data.chmod(0o755)
    ready = float("nan")
    try:
        server = start_servers(data)
        ready = time.monotonic() - started
        yield server
    finally:
        stop_servers(data)
        note(
            "real servers",
            f"mail ({worker_id()}): {time.monotonic() - started:.1f}s "
            f"against Dovecot + Postfix (servers up after {ready:.1f}s)",
        )
