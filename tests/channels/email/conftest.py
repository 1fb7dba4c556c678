"""Fixtures of the email tests: a bot mailbox of its own for each test on the suite's one
real Dovecot + Postfix (`mail_server`, tests/support/servers.py, started once per worker)."""

from __future__ import annotations

import pytest

from tests.channels.email.mailbox import MailServer
from tests.support.daemon import daemons, data_dir

__all__ = ["daemons", "data_dir"]


@pytest.fixture
def bot(mail_server: MailServer) -> str:
    """A fresh bot account (an empty INBOX) for one test."""
    return mail_server.take_bot()
