"""Fixtures of the email tests: one real Dovecot + Postfix for all of them (the fixture is
shared: tests/support/mail.py).

The servers are started once (installing the Debian packages when missing), on free
loopback ports, in a data dir that the mail users (nobody, postfix, dovecot) can enter —
pytest's own temp dirs are private to root, which Dovecot's delivery cannot use. They are
stopped by PID once the last email test is done (package scope, so the servers do not stay
up for the rest of the suite), and the time the email part took is printed.
"""

from __future__ import annotations

import pytest

from tests.channels.email.mailbox import MailServer
from tests.support.daemon import daemons, data_dir
from tests.support.mail import mail_server

__all__ = ["daemons", "data_dir", "mail_server"]


@pytest.fixture
def bot(mail_server: MailServer) -> str:
    """A fresh bot account (an empty INBOX) for one test."""
    return mail_server.take_bot()
