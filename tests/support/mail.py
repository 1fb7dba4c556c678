"""The real mail servers the end-to-end tests share: Dovecot + Postfix on loopback.

`mail_server` (package scope where a conftest imports it: `from tests.support.mail import
mail_server as mail_server`) starts them once (installing the Debian packages when
missing), on free loopback ports, in a data dir that the mail users (nobody, postfix,
dovecot) can enter — pytest's own temp dirs are private to root, which Dovecot's delivery
cannot use. They are stopped by PID once the package's last test is done, and the time the
mail part took is printed. Under pytest-xdist each worker that runs a test of the package
starts its own (free ports, own data dir): tests stop Postfix and count on fresh mailboxes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.channels.email.mailbox import MailServer, start_servers, stop_servers
from tests.support.summary import note, where, worker_id


def _can_run_servers() -> str | None:
    if os.geteuid() != 0:
        return "the mail servers need root"
    if not (shutil.which("apt-get") or shutil.which("dovecot")):
        return "neither dovecot nor apt-get is available"
    return None


@pytest.fixture(scope="package")
def mail_server(request: pytest.FixtureRequest) -> Iterator[MailServer]:
    reason = _can_run_servers()
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
            f"mail for {where(request)} ({worker_id()}): {time.monotonic() - started:.1f}s "
            f"against Dovecot + Postfix (servers up after {ready:.1f}s)",
        )
