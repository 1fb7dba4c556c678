"""Fixtures of the email tests: one real Dovecot + Postfix for all of them.

The servers are started once (installing the Debian packages when missing), on free
loopback ports, in a data dir that the mail users (nobody, postfix, dovecot) can enter —
pytest's own temp dirs are private to root, which Dovecot's delivery cannot use. They are
stopped by PID once the last email test is done (package scope, so the servers do not stay
up for the rest of the suite), and the time the email part took is printed.
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
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    ready = float("nan")
    try:
        server = start_servers(data)
        ready = time.monotonic() - started
        yield server
    finally:
        stop_servers(data)
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if reporter is not None and capture is not None:
            total = time.monotonic() - started
            with capture.global_and_fixture_disabled():
                reporter.write_line(
                    f"\nemail tests: {total:.1f} s against Dovecot + Postfix "
                    f"(servers up after {ready:.1f} s)"
                )


@pytest.fixture
def bot(mail_server: MailServer) -> str:
    """A fresh bot account (an empty INBOX) for one test."""
    return mail_server.take_bot()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path
