"""Fixtures of the scenarios: people on the real servers (the suite's Synapse and Dovecot +
Postfix, tests/conftest.py, each started once per worker when a test needs it), and the
`squidd run` children a scenario started, killed at its end if still running."""

from __future__ import annotations

import pytest

from tests.channels.email.mailbox import MailServer
from tests.support.matrix import (
    bot,
    make_element,
    make_human,
    make_user,
    squidds,
    uid,
)
from tests.support.matrix_daemon import matrix_squidd, scene

__all__ = ["bot", "make_element", "make_human", "make_user", "squidds"]
__all__ += ["matrix_squidd", "scene", "uid"]


@pytest.fixture
def mail_bot(mail_server: MailServer) -> str:
    """A fresh bot mailbox (an empty INBOX) for one scenario."""
    return mail_server.take_bot()
